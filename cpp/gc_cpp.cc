// gc_cpp.cc: liblfgccpp, the C++ support of lfgc (bdwgc's libgccpp).
//
// Replaces the global operator new and delete: memory from plain new is
// uncollectable lfgc memory, scanned like a root, so that objects of any
// class may point to collectable objects; delete frees it at once.  Also
// provides GC_throw_bad_alloc for the inline code of gc_cpp.h and
// gc_allocator.h.
#include "gc_cpp.h"

#define LFGCPP_EXPORT __attribute__((visibility("default")))

LFGCPP_EXPORT void GC_throw_bad_alloc()
{
    throw std::bad_alloc();
}

static inline void *uncollectable(std::size_t size)
{
    void *p = GC_MALLOC_UNCOLLECTABLE(size);
    if (!p)
        GC_throw_bad_alloc();
    return p;
}

LFGCPP_EXPORT void *operator new(std::size_t size)
{
    return uncollectable(size);
}

LFGCPP_EXPORT void *operator new[](std::size_t size)
{
    return uncollectable(size);
}

LFGCPP_EXPORT void operator delete(void *obj) noexcept
{
    GC_FREE(obj);
}

LFGCPP_EXPORT void operator delete[](void *obj) noexcept
{
    GC_FREE(obj);
}

LFGCPP_EXPORT void operator delete(void *obj, std::size_t) noexcept
{
    GC_FREE(obj);
}

LFGCPP_EXPORT void operator delete[](void *obj, std::size_t) noexcept
{
    GC_FREE(obj);
}
