/* gc_allocator.h: standard-library allocators over lfgc, compatible with
 * bdwgc's gc_allocator.h.
 *
 *   gc_allocator<T>                 collectable storage: a container's
 *                                   buffers are freed by the collector once
 *                                   unreachable; pointer-free for the
 *                                   arithmetic types (never scanned)
 *   gc_allocator_ignore_off_page<T> the same (lfgc treats ignore-off-page
 *                                   requests as plain ones)
 *   traceable_allocator<T>          uncollectable storage, scanned: a
 *                                   container allocated anywhere (malloc,
 *                                   static, stack) keeps what its elements
 *                                   point to; freed by deallocate
 *
 * A container using gc_allocator must itself be reachable by the collector
 * (on the stack, in static data or in a collectable object), since only its
 * buffers' addresses keep them.  Out of memory throws std::bad_alloc.
 */
#ifndef LFGC_GC_ALLOCATOR_H
#define LFGC_GC_ALLOCATOR_H

#include <cstddef>
#include <new>

#include "gc.h"

void GC_throw_bad_alloc();

/* Whether objects of T can hold no pointer: true for arithmetic types,
 * false otherwise (a class may hold pointers). */
struct GC_true_type {};
struct GC_false_type {};
template <class T> struct GC_type_traits { GC_false_type GC_is_ptr_free; };
#define LFGC_DECLARE_PTRFREE(T) \
    template <> struct GC_type_traits<T> { GC_true_type GC_is_ptr_free; }
LFGC_DECLARE_PTRFREE(char);
LFGC_DECLARE_PTRFREE(signed char);
LFGC_DECLARE_PTRFREE(unsigned char);
LFGC_DECLARE_PTRFREE(signed short);
LFGC_DECLARE_PTRFREE(unsigned short);
LFGC_DECLARE_PTRFREE(signed int);
LFGC_DECLARE_PTRFREE(unsigned int);
LFGC_DECLARE_PTRFREE(signed long);
LFGC_DECLARE_PTRFREE(unsigned long);
LFGC_DECLARE_PTRFREE(signed long long);
LFGC_DECLARE_PTRFREE(unsigned long long);
LFGC_DECLARE_PTRFREE(float);
LFGC_DECLARE_PTRFREE(double);
LFGC_DECLARE_PTRFREE(long double);
LFGC_DECLARE_PTRFREE(wchar_t);
LFGC_DECLARE_PTRFREE(char16_t);
LFGC_DECLARE_PTRFREE(char32_t);
LFGC_DECLARE_PTRFREE(bool);
#undef LFGC_DECLARE_PTRFREE

inline void *GC_selective_alloc(std::size_t n, GC_false_type, bool ignore_off_page)
{
    void *p = ignore_off_page ? GC_MALLOC_IGNORE_OFF_PAGE(n) : GC_MALLOC(n);
    if (!p)
        GC_throw_bad_alloc();
    return p;
}

inline void *GC_selective_alloc(std::size_t n, GC_true_type, bool ignore_off_page)
{
    void *p = ignore_off_page ? GC_MALLOC_ATOMIC_IGNORE_OFF_PAGE(n) : GC_MALLOC_ATOMIC(n);
    if (!p)
        GC_throw_bad_alloc();
    return p;
}

/* The three allocators differ only in how they get and give back
 * memory; LFGC_ALLOCATOR_BODY writes the rest of each. */
#define LFGC_ALLOCATOR_BODY(NAME)                                                   \
public:                                                                             \
    typedef std::size_t size_type;                                                  \
    typedef std::ptrdiff_t difference_type;                                         \
    typedef T *pointer;                                                             \
    typedef const T *const_pointer;                                                 \
    typedef T &reference;                                                           \
    typedef const T &const_reference;                                               \
    typedef T value_type;                                                           \
    template <class U> struct rebind { typedef NAME<U> other; };                    \
    NAME() noexcept {}                                                              \
    NAME(const NAME &) noexcept {}                                                  \
    template <class U> NAME(const NAME<U> &) noexcept {}                            \
    ~NAME() noexcept {}                                                             \
    pointer address(reference x) const { return &x; }                               \
    const_pointer address(const_reference x) const { return &x; }                   \
    size_type max_size() const noexcept { return size_type(-1) / sizeof(T); }       \
    template <class U, class... A> void construct(U *p, A &&...args)                \
    {                                                                               \
        ::new ((void *)p) U(static_cast<A &&>(args)...);                            \
    }                                                                               \
    template <class U> void destroy(U *p) { p->~U(); }

template <class T> class gc_allocator {
    LFGC_ALLOCATOR_BODY(gc_allocator)
    T *allocate(size_type n, const void * = 0)
    {
        GC_type_traits<T> traits;
        return static_cast<T *>(GC_selective_alloc(n * sizeof(T), traits.GC_is_ptr_free, false));
    }
    void deallocate(pointer p, size_type) noexcept { GC_FREE(p); }
};

template <class T> class gc_allocator_ignore_off_page {
    LFGC_ALLOCATOR_BODY(gc_allocator_ignore_off_page)
    T *allocate(size_type n, const void * = 0)
    {
        GC_type_traits<T> traits;
        return static_cast<T *>(GC_selective_alloc(n * sizeof(T), traits.GC_is_ptr_free, true));
    }
    void deallocate(pointer p, size_type) noexcept { GC_FREE(p); }
};

template <class T> class traceable_allocator {
    LFGC_ALLOCATOR_BODY(traceable_allocator)
    T *allocate(size_type n, const void * = 0)
    {
        void *p = GC_MALLOC_UNCOLLECTABLE(n * sizeof(T));
        if (!p)
            GC_throw_bad_alloc();
        return static_cast<T *>(p);
    }
    void deallocate(pointer p, size_type) noexcept { GC_FREE(p); }
};

#undef LFGC_ALLOCATOR_BODY

/* Any two allocators of one family are interchangeable. */
template <class T1, class T2>
inline bool operator==(const gc_allocator<T1> &, const gc_allocator<T2> &) { return true; }
template <class T1, class T2>
inline bool operator!=(const gc_allocator<T1> &, const gc_allocator<T2> &) { return false; }
template <class T1, class T2>
inline bool operator==(const gc_allocator_ignore_off_page<T1> &,
                       const gc_allocator_ignore_off_page<T2> &) { return true; }
template <class T1, class T2>
inline bool operator!=(const gc_allocator_ignore_off_page<T1> &,
                       const gc_allocator_ignore_off_page<T2> &) { return false; }
template <class T1, class T2>
inline bool operator==(const traceable_allocator<T1> &, const traceable_allocator<T2> &)
{
    return true;
}
template <class T1, class T2>
inline bool operator!=(const traceable_allocator<T1> &, const traceable_allocator<T2> &)
{
    return false;
}

#endif /* LFGC_GC_ALLOCATOR_H */
