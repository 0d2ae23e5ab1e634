/* tree234_impl.h: the 2-3-4 tree's code, instantiated by tree234.h
 * (size-typed nodes) and tree234_plain.h (the kind stored in the node).
 * Not include-guarded on purpose.
 *
 * A node with k keys (1..3) is, size-typed: k keys then k + 1 children,
 * 16k + 8 bytes, so the slot is 16(k + 1) bytes and k = slot / 16 - 1.
 * Plain: one more word in front holding k.  Children are NULL in leaves.
 */
#include <lowfat.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define T234_CAT_(a, b) a##b
#define T234_CAT(a, b) T234_CAT_(a, b)
#define T234(name) T234_CAT(T234_PREFIX, name)

#ifdef T234_PLAIN
# define T234_HDR 1
#else
# define T234_HDR 0
#endif

/* Number of keys of node n. */
static inline int T234(nkeys)(const void *n)
{
#ifdef T234_PLAIN
    return (int)*(const long *)n;
#else
    return (int)(lowfat_size(n) >> 4) - 1;
#endif
}

static inline long *T234(keys)(void *n)
{
    return (long *)n + T234_HDR;
}

static inline void **T234(kids)(void *n, int k)
{
    return (void **)((long *)n + T234_HDR + k);
}

/* A node with k keys and k + 1 children copied from the arrays. */
static inline void *T234(node)(int k, const long *keys, void *const *kids)
{
    long *n = malloc((size_t)(T234_HDR + 2 * k + 1) * sizeof(long));
    if (n == NULL)
        return NULL;
#ifdef T234_PLAIN
    n[0] = k;
#endif
    memcpy(T234(keys)(n), keys, (size_t)k * sizeof(long));
    memcpy(T234(kids)(n, k), kids, (size_t)(k + 1) * sizeof(void *));
    return n;
}

static inline int T234(find)(const void *root, long key)
{
    const void *n = root;
    while (n) {
        int k = T234(nkeys)(n), i = 0;
        const long *ks = T234(keys)((void *)n);
        while (i < k && key > ks[i])
            i++;
        if (i < k && key == ks[i])
            return 1;
        n = T234(kids)((void *)n, k)[i];
    }
    return 0;
}

/* Split the 4-node c, child i of parent p (a 2- or 3-node): p gains c's
 * middle key and becomes the next kind up; returns the new parent, or NULL
 * when out of memory (nothing changed then). */
static inline void *T234(split_child)(void *p, int i, void *c)
{
    long *ck = T234(keys)(c);
    void **cc = T234(kids)(c, 3);
    void *left = T234(node)(1, ck, cc);
    void *right = T234(node)(1, ck + 2, cc + 2);
    int k = T234(nkeys)(p);
    long keys[3];
    void *kids[4];
    const long *pk = T234(keys)(p);
    void **pc = T234(kids)(p, k);
    memcpy(keys, pk, (size_t)i * sizeof(long));
    keys[i] = ck[1];
    memcpy(keys + i + 1, pk + i, (size_t)(k - i) * sizeof(long));
    memcpy(kids, pc, (size_t)i * sizeof(void *));
    kids[i] = left;
    kids[i + 1] = right;
    memcpy(kids + i + 2, pc + i + 1, (size_t)(k - i) * sizeof(void *));
    void *np = left && right ? T234(node)(k + 1, keys, kids) : NULL;
    if (np == NULL) {
        free(left);
        free(right);
        return NULL;
    }
    free(c);
    free(p);
    return np;
}

/* Add key (top-down: every 4-node met on the way down is split first, so
 * there is always room in the parent).  1: added, 0: already there,
 * -1: out of memory (the tree is unchanged). */
static inline int T234(insert)(void **root, long key)
{
    if (*root == NULL) {
        void *kids[2] = {NULL, NULL};
        *root = T234(node)(1, &key, kids);
        return *root ? 1 : -1;
    }
    if (T234(nkeys)(*root) == 3) {
        /* Split the root: its middle key goes up into a new 2-node. */
        void *c = *root;
        long *ck = T234(keys)(c);
        void **cc = T234(kids)(c, 3);
        void *left = T234(node)(1, ck, cc);
        void *right = T234(node)(1, ck + 2, cc + 2);
        void *two[2] = {left, right};
        void *top = left && right ? T234(node)(1, ck + 1, two) : NULL;
        if (top == NULL) {
            free(left);
            free(right);
            return -1;
        }
        free(c);
        *root = top;
    }
    void **slot = root;
    void *n = *root;
    for (;;) {
        int k = T234(nkeys)(n), i = 0;
        long *ks = T234(keys)(n);
        while (i < k && key > ks[i])
            i++;
        if (i < k && key == ks[i])
            return 0;
        void **kids = T234(kids)(n, k);
        if (kids[0] == NULL) {
            /* A leaf (k < 3): the next kind up, with key at i. */
            long nk[3];
            void *nc[4] = {NULL, NULL, NULL, NULL};
            memcpy(nk, ks, (size_t)i * sizeof(long));
            nk[i] = key;
            memcpy(nk + i + 1, ks + i, (size_t)(k - i) * sizeof(long));
            void *nn = T234(node)(k + 1, nk, nc);
            if (nn == NULL)
                return -1;
            *slot = nn;
            free(n);
            return 1;
        }
        void *c = kids[i];
        if (T234(nkeys)(c) == 3) {
            void *np = T234(split_child)(n, i, c);
            if (np == NULL)
                return -1;
            *slot = np;
            n = np;
            continue;           /* look at the grown parent again */
        }
        slot = &kids[i];
        n = c;
    }
}

/* Depth of the leaves under n, or -1 if malformed; counts keys into *count
 * and checks that they lie strictly between lo and hi. */
static inline int T234(check_node)(void *n, long lo, long hi, int lo_open,
                                   int hi_open, size_t *count)
{
    size_t s = lowfat_size(n);
#ifdef T234_PLAIN
    (void)s;
#else
    if (s != 32 && s != 48 && s != 64)
        return -1;
#endif
    int k = T234(nkeys)(n);
    if (k < 1 || k > 3)
        return -1;
    long *ks = T234(keys)(n);
    void **kids = T234(kids)(n, k);
    for (int i = 0; i < k; i++) {
        if ((!lo_open && ks[i] <= lo) || (!hi_open && ks[i] >= hi))
            return -1;
        if (i > 0 && ks[i] <= ks[i - 1])
            return -1;
    }
    *count += (size_t)k;
    if (kids[0] == NULL) {
        for (int i = 1; i <= k; i++)
            if (kids[i] != NULL)
                return -1;
        return 0;
    }
    int depth = -2;
    for (int i = 0; i <= k; i++) {
        if (kids[i] == NULL)
            return -1;
        int d = T234(check_node)(kids[i], i ? ks[i - 1] : lo,
                                 i < k ? ks[i] : hi, i ? 0 : lo_open,
                                 i < k ? 0 : hi_open, count);
        if (d < 0 || (depth != -2 && d != depth))
            return -1;
        depth = d;
    }
    return depth + 1;
}

static inline int T234(check)(void *root, size_t *count)
{
    *count = 0;
    if (root == NULL)
        return 0;
    return T234(check_node)(root, 0, 0, 1, 1, count) < 0 ? -1 : 0;
}

static inline void T234(free)(void *n)
{
    if (n == NULL)
        return;
    int k = T234(nkeys)(n);
    void **kids = T234(kids)(n, k);
    for (int i = 0; i <= k; i++)
        T234(free)(kids[i]);
    free(n);
}

#undef T234_HDR
#undef T234
