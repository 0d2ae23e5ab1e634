/* gc_cpp.h: C++ interface of lfgc, compatible with bdwgc's gc_cpp.h.
 *
 *   class A : public gc { ... };            collectable: new A lives until
 *                                           unreachable (delete frees now)
 *   class B : public gc_cleanup { ... };    the same, and ~B runs (through
 *                                           a finalizer) when it is reclaimed
 *   new (UseGC) T / new (GC) T              a collectable object of any T
 *   new (NoGC) T                            uncollectable: a root until delete
 *   new (PointerFreeGC) T                   collectable, never scanned
 *   new (UseGC, fn, data) T                 collectable; fn(obj, data) runs
 *                                           when it is reclaimed
 *
 * An object of class gc (or gc_cleanup) allocated with plain new is
 * collectable; new (NoGC) makes it uncollectable.  Arrays (new[]) of such
 * classes follow the same placement, without cleanup.  Objects of other
 * classes allocated with plain new come from ::operator new, which
 * liblfgccpp (link -llfgccpp) replaces with uncollectable lfgc memory, so
 * that they may point to collectable objects (delete frees them).
 * gc_cleanup destructors run from finalizers, outside the collection (see
 * GC_register_finalizer in gc.h); an object reachable from itself is
 * still finalized (ignore-self registration).  Run-time errors: running
 * out of memory throws std::bad_alloc (GC_throw_bad_alloc).
 */
#ifndef LFGC_GC_CPP_H
#define LFGC_GC_CPP_H

#include <cstddef>
#include <new>

#include "gc.h"

/* Throws std::bad_alloc (liblfgccpp).  At global scope, where the library
 * defines it, also when GC_NAMESPACE puts the rest in namespace boehmgc. */
void GC_throw_bad_alloc();

/* What the operators below do when the collector returns NULL, as bdwgc's
 * header: throw std::bad_alloc, or, with GC_NEW_ABORTS_ON_OOM (programs
 * built without exceptions), GC_abort_on_oom.  Programs use it in their
 * own operator new too. */
#ifndef GC_OP_NEW_OOM_CHECK
# if defined(GC_NEW_ABORTS_ON_OOM) || defined(_LIBCPP_NO_EXCEPTIONS)
#  define GC_OP_NEW_OOM_CHECK(obj) do { if (!(obj)) GC_abort_on_oom(); } while (0)
# else
#  define GC_OP_NEW_OOM_CHECK(obj) do { if (!(obj)) ::GC_throw_bad_alloc(); } while (0)
# endif
#endif

#ifdef GC_NAMESPACE
namespace boehmgc {
# define GC_NS_QUALIFY(T) boehmgc::T
#else
# define GC_NS_QUALIFY(T) T
#endif

enum GCPlacement {
    UseGC,
#ifndef GC_NAME_CONFLICT
    GC = UseGC,
#endif
    NoGC,
    PointerFreeGC,
    PointerFreeNoGC
};

/* Allocation with placement; raises bad_alloc rather than returning 0. */
inline void *lfgc_cpp_alloc(std::size_t size, GCPlacement gcp)
{
    void *obj;
    switch (gcp) {
    case UseGC:           obj = GC_MALLOC(size); break;
    case PointerFreeGC:   obj = GC_MALLOC_ATOMIC(size); break;
    case PointerFreeNoGC: obj = GC_MALLOC_ATOMIC_UNCOLLECTABLE(size); break;
    default:              obj = GC_MALLOC_UNCOLLECTABLE(size); break;
    }
    GC_OP_NEW_OOM_CHECK(obj);
    return obj;
}

class gc {
public:
    inline void *operator new(std::size_t size) { return lfgc_cpp_alloc(size, UseGC); }
    inline void *operator new(std::size_t size, GCPlacement gcp)
    {
        return lfgc_cpp_alloc(size, gcp);
    }
    inline void *operator new(std::size_t, void *p) noexcept { return p; }
    inline void *operator new(std::size_t size, const std::nothrow_t &) noexcept
    {
        return GC_MALLOC(size);
    }
    inline void operator delete(void *obj) noexcept { GC_FREE(obj); }
    inline void operator delete(void *, void *) noexcept {}
    inline void operator delete(void *obj, GCPlacement) noexcept { GC_FREE(obj); }
    inline void operator delete(void *obj, const std::nothrow_t &) noexcept { GC_FREE(obj); }

    inline void *operator new[](std::size_t size) { return lfgc_cpp_alloc(size, UseGC); }
    inline void *operator new[](std::size_t size, GCPlacement gcp)
    {
        return lfgc_cpp_alloc(size, gcp);
    }
    inline void *operator new[](std::size_t, void *p) noexcept { return p; }
    inline void *operator new[](std::size_t size, const std::nothrow_t &) noexcept
    {
        return GC_MALLOC(size);
    }
    inline void operator delete[](void *obj) noexcept { GC_FREE(obj); }
    inline void operator delete[](void *, void *) noexcept {}
    inline void operator delete[](void *obj, GCPlacement) noexcept { GC_FREE(obj); }
    inline void operator delete[](void *obj, const std::nothrow_t &) noexcept { GC_FREE(obj); }
};

/* A collectable object whose destructor runs when it is reclaimed.  The
 * finalizer is registered on the start of the heap object holding this
 * (a gc_cleanup may be a base class at an offset); deleting the object
 * explicitly runs the destructor once and unregisters it. */
class gc_cleanup : virtual public gc {
public:
    inline gc_cleanup()
    {
        void *base = GC_base(this);
        if (!base)
            return;     /* on the stack, static, or in malloc memory */
        GC_finalization_proc oldfn = 0;
        void *olddata = 0;
        GC_REGISTER_FINALIZER_IGNORE_SELF(base, cleanup,
                                          (void *)((char *)this - (char *)base),
                                          &oldfn, &olddata);
        /* A finalizer that was there first (new (UseGC, fn, data)) stays. */
        if (oldfn)
            GC_REGISTER_FINALIZER_IGNORE_SELF(base, oldfn, olddata, 0, 0);
    }
    inline virtual ~gc_cleanup()
    {
        void *base = GC_base(this);
        if (base)
            GC_REGISTER_FINALIZER_IGNORE_SELF(base, 0, 0, 0, 0);
    }

private:
    static inline void cleanup(void *obj, void *displacement)
    {
        ((gc_cleanup *)((char *)obj + (std::ptrdiff_t)displacement))->~gc_cleanup();
    }
};

extern "C" {
typedef void (*GCCleanUpFunc)(void *obj, void *clientData);
}

#ifdef GC_NAMESPACE
}
#endif

/* Collectable (or not) objects of any class, with an optional function
 * run when a collectable one is reclaimed. */
inline void *operator new(std::size_t size, GC_NS_QUALIFY(GCPlacement) gcp,
                          GC_NS_QUALIFY(GCCleanUpFunc) cleanup = 0, void *clientData = 0)
{
    void *obj = GC_NS_QUALIFY(lfgc_cpp_alloc)(size, gcp);
    if (cleanup && gcp == GC_NS_QUALIFY(UseGC))
        GC_REGISTER_FINALIZER_IGNORE_SELF(obj, cleanup, clientData, 0, 0);
    return obj;
}

inline void operator delete(void *obj, GC_NS_QUALIFY(GCPlacement),
                            GC_NS_QUALIFY(GCCleanUpFunc), void *) noexcept
{
    GC_FREE(obj);
}

inline void *operator new[](std::size_t size, GC_NS_QUALIFY(GCPlacement) gcp,
                            GC_NS_QUALIFY(GCCleanUpFunc) cleanup = 0, void *clientData = 0)
{
    return ::operator new(size, gcp, cleanup, clientData);
}

inline void operator delete[](void *obj, GC_NS_QUALIFY(GCPlacement),
                              GC_NS_QUALIFY(GCCleanUpFunc), void *) noexcept
{
    GC_FREE(obj);
}

#endif /* LFGC_GC_CPP_H */
