/* bounds.c: checked_memcpy and checked_strcpy (bounds.h) at work.
 *
 * Copies names into 32-byte heap records with checked_strcpy.  The last
 * name is too long: an unchecked strcpy would write into the object that
 * follows its record in memory; the checked one refuses the copy, and that
 * object is shown intact.  Exits 0 when exactly that overflow was caught and every
 * other copy was made.
 */
#include "bounds.h"

static int caught;

static void count_error(const char *fn, const void *p, size_t want,
                        size_t room)
{
    printf("caught: %s of %zu bytes at %p, %zu bytes left in its object\n",
           fn, want, p, room);
    caught++;
}

int main(void)
{
    static const char *const names[] = {
        "ada", "grace hopper", "barbara liskov", "edsger",
        "a name much too long for a thirty-two byte record",
    };
    enum { N = sizeof names / sizeof names[0] };
    char *rec[N];
    bounds_on_error = count_error;
    for (int i = 0; i < N; i++) {
        rec[i] = malloc(32);
        if (rec[i] == NULL || !lowfat_is_heap_ptr(rec[i])) {
            fprintf(stderr, "bounds: malloc did not return a low-fat "
                    "pointer: link lfgc's malloc\n");
            return 1;
        }
        memset(rec[i], 0, 32);
    }
    int made = 0;
    for (int i = 0; i < N - 1; i++) {
        checked_strcpy(rec[i], names[i]);
        made += strcmp(rec[i], names[i]) == 0;
    }
    /* The object after the last record in memory, whoever owns it: the
     * long name must not reach it. */
    char *last = rec[N - 1], *next = last + lowfat_size(last);
    char saved[32];
    memcpy(saved, next, sizeof saved);
    checked_strcpy(last, names[N - 1]);
    made += strcmp(last, names[N - 1]) == 0;
    int intact = memcmp(saved, next, sizeof saved) == 0;
    printf("%d of %d names copied, %d overflow caught, next object %s\n",
           made, N, caught, intact ? "intact" : "DAMAGED");
    for (int i = 0; i < N; i++)
        free(rec[i]);
    return made == N - 1 && caught == 1 && intact ? 0 : 1;
}
