/* test_bounds.c: bounds.h's checked_memcpy and checked_strcpy. */
#include <criterion/criterion.h>
#include <signal.h>
#include "bounds.h"

static int errors;
static const void *err_ptr;
static size_t err_want, err_room;

static void record(const char *fn, const void *p, size_t want, size_t room)
{
    (void)fn;
    errors++;
    err_ptr = p;
    err_want = want;
    err_room = room;
}

static void setup(void)
{
    errors = 0;
    bounds_on_error = record;
}

/* Two objects of `size` bytes next to each other in memory: b is the
 * object right after a. */
static void adjacent_pair(size_t size, char **a, char **b)
{
    void *seen[256];
    for (int i = 0; i < 256; i++) {
        seen[i] = malloc(size);
        cr_assert(lowfat_is_heap_ptr(seen[i]), "malloc is not lfgc's");
        for (int j = 0; j < i; j++) {
            if ((char *)seen[j] + lowfat_size(seen[j]) == seen[i]) {
                *a = seen[j];
                *b = seen[i];
                for (int k = 0; k < i; k++)
                    if (k != j)
                        free(seen[k]);
                return;
            }
        }
    }
    cr_assert_fail("no two adjacent objects of %zu bytes in 256", size);
}

Test(bounds, copies_that_fit, .init = setup)
{
    char *src = malloc(100), *dst = malloc(100);
    for (int i = 0; i < 100; i++)
        src[i] = (char)i;
    size_t room = lowfat_usable_size(dst);
    cr_assert_geq(room, 100);
    cr_assert_eq(checked_memcpy(dst, src, 100), dst);
    cr_assert_eq(memcmp(dst, src, 100), 0);
    /* From an interior pointer, up to the end of the object. */
    cr_assert_eq(checked_memcpy(dst + 10, src, room - 10), dst + 10);
    cr_assert_eq(errors, 0);
    checked_strcpy(dst, "hello");
    cr_assert_str_eq(dst, "hello");
    cr_assert_eq(errors, 0);
    free(src);
    free(dst);
}

Test(bounds, overflow_into_next_object_caught, .init = setup)
{
    char *a, *b;
    adjacent_pair(48, &a, &b);
    size_t size = lowfat_size(a);
    memset(b, 'B', size);
    char src[256];
    memset(src, 'x', sizeof src);
    /* 8 bytes more than a's slot: they would land in b. */
    checked_memcpy(a, src, size + 8);
    cr_assert_eq(errors, 1);
    cr_assert_eq(err_ptr, a);
    cr_assert_eq(err_want, size + 8);
    cr_assert_eq(err_room, size);
    for (size_t i = 0; i < size; i++)
        cr_assert_eq(b[i], 'B', "b damaged at %zu", i);
    /* The same from an interior pointer: size - 18 bytes left at a + 18. */
    checked_memcpy(a + 18, src, size - 17);
    cr_assert_eq(errors, 2);
    cr_assert_eq(err_room, size - 18);
    checked_memcpy(a + 18, src, size - 18);
    cr_assert_eq(errors, 2);
    /* What the check prevents: the plain copy writes into b. */
    memcpy(a, src, size + 8);
    cr_assert_eq(b[0], 'x');
    free(a);
    free(b);
}

Test(bounds, strcpy_overflow_and_unterminated_source, .init = setup)
{
    char *a, *b;
    adjacent_pair(32, &a, &b);
    size_t size = lowfat_size(a);
    strcpy(b, "neighbour");
    char s[256];
    memset(s, 'z', sizeof s);
    s[size - 1] = '\0';                     /* fits, with its NUL */
    checked_strcpy(a, s);
    cr_assert_eq(errors, 0);
    cr_assert_str_eq(a, s);
    s[size - 1] = 'z';
    s[size] = '\0';                         /* one byte too many */
    checked_strcpy(a, s);
    cr_assert_eq(errors, 1);
    cr_assert_eq(err_want, size + 1);
    cr_assert_str_eq(b, "neighbour");
    /* A source with no NUL in its object is refused before reading on. */
    memset(a, 'y', size);
    char *dst = malloc(200);
    checked_strcpy(dst, a);
    cr_assert_eq(errors, 2);
    cr_assert_eq(err_ptr, a);
    free(dst);
    free(a);
    free(b);
}

Test(bounds, source_overflow_caught, .init = setup)
{
    char *src = malloc(16), *dst = malloc(64);
    size_t n = 17;
    __asm__("" : "+r"(n));      /* keep gcc from seeing the overflow */
    memset(src, 0, 16);
    memset(dst, 0, 64);
    checked_memcpy(dst, src, n);
    cr_assert_eq(errors, 1);
    cr_assert_eq(err_ptr, src);
    free(src);
    free(dst);
}

Test(bounds, non_lowfat_pointers_unchecked, .init = setup)
{
    char stack[16] = "", heap_src[8] = "abc";
    checked_memcpy(stack, heap_src, sizeof heap_src);
    cr_assert_eq(errors, 0);
    cr_assert_str_eq(stack, "abc");
}

Test(bounds, default_handler_aborts, .signal = SIGABRT)
{
    char *p = malloc(16);
    size_t n = 17;
    __asm__("" : "+r"(n));
    memset(p, 0, 16);
    checked_memcpy(p, "0123456789abcdefg", n);
}
