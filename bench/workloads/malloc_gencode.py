#!/usr/bin/env python3
"""malloc_gencode.py: write a C source file for the `gcc` malloc-mode case.

    malloc_gencode.py FUNCTIONS > input.c

The file is made up, deterministically (the same for a given FUNCTIONS),
of structs, switch statements, loops, inline helpers and string tables, so
that gcc -O2 exercises its parser, optimisers and register allocator, which
allocate much.  It compiles without warnings and needs only <stddef.h>.
"""
import sys


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = 12345

    def rnd(k):
        nonlocal seed
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        return seed % k

    out = ["#include <stddef.h>", ""]
    for i in range(n):
        nf = 2 + rnd(6)
        out.append(f"struct s{i} {{")
        for f in range(nf):
            out.append(f"    {'long' if rnd(2) else 'int'} f{f};")
        out.append(f"    struct s{i} *next;")
        out.append("};")
        out.append(f"static inline long h{i}(long x) {{ return x * {rnd(97) + 3} "
                   f"^ (x >> {rnd(13) + 1}); }}")
        out.append(f"static const char *const t{i}[] = {{"
                   + ", ".join(f'"w{i}_{k}_{rnd(1000)}"' for k in range(4 + rnd(8)))
                   + "};")
        out.append(f"long g{i}(struct s{i} *p, long a, long b)")
        out.append("{")
        out.append("    long acc = 0;")
        out.append("    for (; p; p = p->next) {")
        out.append(f"        switch ((a + p->f0) & {7 + rnd(8)}) {{")
        for c in range(8 + rnd(8)):
            f = rnd(nf)
            out.append(f"        case {c}: acc += h{i}(p->f{f} + {rnd(100)}) "
                       f"{'+' if rnd(2) else '-'} b * {rnd(50) + 1}; break;")
        out.append("        default: acc ^= (long)sizeof(struct s%d);" % i)
        out.append("        }")
        out.append(f"        for (int k = 0; k < {2 + rnd(6)}; k++)")
        out.append(f"            acc += (long)t{i}[(acc + k) & 3][k & 1] * k;")
        out.append("    }")
        if i > 0:
            out.append(f"    if (a > {rnd(1000)}) acc += g{i - 1}"
                       f"((struct s{i - 1} *)0, b, a - 1);")
        out.append("    return acc;")
        out.append("}")
        out.append("")
    out.append(f"long (*const entry)(struct s{n - 1} *, long, long) = g{n - 1};")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
