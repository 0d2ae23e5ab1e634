/* tree234_plain.h: the 2-3-4 tree of tree234.h with each node's kind
 * stored in the node (a word in front of the keys), as a program on an
 * ordinary malloc has to: p234_insert, p234_find, p234_check, p234_free.
 * For comparison with the size-typed version.  Header-only. */
#ifndef EXAMPLES_TREE234_PLAIN_H
#define EXAMPLES_TREE234_PLAIN_H

#define T234_PREFIX p234_
#define T234_PLAIN 1
#include "tree234_impl.h"
#undef T234_PLAIN
#undef T234_PREFIX

#endif /* EXAMPLES_TREE234_PLAIN_H */
