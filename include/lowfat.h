/* lowfat.h: the low-fat pointer API of lfgc.
 *
 * The address space is cut into regions of 2^LOWFAT_REGION_SHIFT bytes.
 * Region LOWFAT_FIRST_REGION + c holds only objects of size class c, each
 * aligned to (a multiple of) its size, so the size and the base of any
 * object follow from any pointer into it with a shift, two table loads and
 * a multiplication: no header, no search, no division, no call.
 *
 * Every function here takes a user-space address (below 2^47), as every
 * pointer on x86_64 Linux is.  For an arbitrary 64-bit word, test it with
 * lowfat_is_ptr() first.
 */
#ifndef LOWFAT_H
#define LOWFAT_H

#include <stddef.h>
#include <stdint.h>
#include "lfgc_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWFAT_REGION_SIZE   ((uint64_t)1 << LOWFAT_REGION_SHIFT)
/* Number of size classes in the paper's configuration (Appendix A). */
#define LOWFAT_NUM_CLASSES   61
/* One table entry per region index a user-space address can have. */
#define LOWFAT_TABLE_SIZE    ((size_t)1 << (47 - LOWFAT_REGION_SHIFT))
/* [LOWFAT_HEAP_START, LOWFAT_HEAP_END): the low-fat regions. */
#define LOWFAT_HEAP_START    ((uint64_t)LOWFAT_FIRST_REGION << LOWFAT_REGION_SHIFT)
#define LOWFAT_HEAP_END \
    ((uint64_t)(LOWFAT_FIRST_REGION + LOWFAT_NUM_CLASSES) << LOWFAT_REGION_SHIFT)

/* Layout guard.  The functions below compute with this header's layout;
 * the library must have been built for the same one, or they give wrong
 * answers in silence.  So every program that includes this header refers
 * to lfgc_layout_<shift>_<first region>, which only a library built for
 * that layout defines: against another, the link fails with "undefined
 * reference to `lfgc_layout_28_1'" (say).  The reference is one word in a
 * section that all translation units share (a COMDAT group) and that
 * --gc-sections keeps. */
#define LOWFAT_LAYOUT_ID_(s, f) lfgc_layout_##s##_##f
#define LOWFAT_LAYOUT_ID(s, f)  LOWFAT_LAYOUT_ID_(s, f)
#define LOWFAT_STR_(x) #x
#define LOWFAT_STR(x)  LOWFAT_STR_(x)
#ifndef LFGC_BUILDING
__asm__(".pushsection .lfgc_layout,\"awGR\",@progbits,lfgc_layout_ref,comdat\n\t"
        ".balign 8\n\t"
        ".quad lfgc_layout_" LOWFAT_STR(LOWFAT_REGION_SHIFT) "_"
        LOWFAT_STR(LOWFAT_FIRST_REGION) "\n\t"
        ".popsection");
#endif

/* lowfat_sizes[i]: object size of region i, 0 for a non-fat region.
 * lowfat_magics[i]: 2^64 / size (+1 unless size is a power of two, where the
 * quotient is exact), 0 for a non-fat region, so that lowfat_base() of a
 * non-fat pointer is NULL without a range check.
 * Both are filled when lfgc sets its heap up (its constructor or the first
 * allocation, whichever comes first); until then every entry is 0, as no
 * pointer is low-fat yet.  Zero outside the heap keeps the tables out of
 * memory but for the page that holds the heap's entries.
 * lowfat_heap_top[i]: end of the part of region i the heap has used so far
 * (0 outside the heap); grows, never shrinks. */
#ifdef LFGC_BUILDING
extern uint64_t lowfat_sizes[LOWFAT_TABLE_SIZE];
extern uint64_t lowfat_magics[LOWFAT_TABLE_SIZE];
#else
extern const uint64_t lowfat_sizes[LOWFAT_TABLE_SIZE];
extern const uint64_t lowfat_magics[LOWFAT_TABLE_SIZE];
#endif
extern uint64_t lowfat_heap_top[LOWFAT_TABLE_SIZE];

/* Region index of p: one shift. */
static inline size_t lowfat_index(const void *p)
{
    return (uintptr_t)p >> LOWFAT_REGION_SHIFT;
}

/* Allocation size (slot size, padding included) of the object p points
 * into; SIZE_MAX when p is not a low-fat pointer. */
static inline size_t lowfat_size(const void *p)
{
    uint64_t size = lowfat_sizes[lowfat_index(p)];
    return size - (size == 0);          /* 0 (not low-fat): SIZE_MAX */
}

/* Quotient p / size by fixed-point reciprocal: the slot number of p within
 * the whole address space.  Exact for every slot the allocator hands out
 * (lfgc checks the bound of each region at start-up). */
static inline uint64_t lowfat_slot_number(const void *p)
{
    unsigned __int128 t = (unsigned __int128)(uintptr_t)p *
                          lowfat_magics[lowfat_index(p)];
    return (uint64_t)(t >> 64);
}

/* Base address of the object p points into (p may be interior); NULL when
 * p is not a low-fat pointer. */
static inline void *lowfat_base(const void *p)
{
    size_t i = lowfat_index(p);
    unsigned __int128 t = (unsigned __int128)(uintptr_t)p * lowfat_magics[i];
    return (void *)((uint64_t)(t >> 64) * lowfat_sizes[i]);
}

/* Distance of p from the base of its object (p itself when p is not
 * low-fat, whose base is NULL). */
static inline size_t lowfat_offset(const void *p)
{
    return (uintptr_t)p - (uintptr_t)lowfat_base(p);
}

/* Bytes from p to the end of its object's slot. */
static inline size_t lowfat_usable_size(const void *p)
{
    return lowfat_size(p) - lowfat_offset(p);
}

/* Is p inside the low-fat regions?  One subtraction and one compare; any
 * 64-bit word may be tested. */
static inline int lowfat_is_ptr(const void *p)
{
    return (uintptr_t)p - LOWFAT_HEAP_START < LOWFAT_HEAP_END - LOWFAT_HEAP_START;
}

/* Is p inside the part of the low-fat regions the heap has used? */
static inline int lowfat_is_heap_ptr(const void *p)
{
    return lowfat_is_ptr(p) && (uintptr_t)p < lowfat_heap_top[lowfat_index(p)];
}

#ifdef __cplusplus
}
#endif
#endif /* LOWFAT_H */
