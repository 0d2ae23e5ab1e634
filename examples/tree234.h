/* tree234.h: a 2-3-4 tree with size-typed nodes.
 *
 * The low-fat paper's "size-typed pointers" (4.4): a 2-node (1 key, 2
 * children), a 3-node (2 keys, 3 children) and a 4-node (3 keys, 4
 * children) take 3, 5 and 7 words, which malloc on the low-fat heap puts
 * in three different size classes (32, 48 and 64 bytes).  So a node's kind
 * is not stored anywhere: lowfat_size() of the pointer tells it, a shift
 * and a table load.  A node that gains a key moves to the next class.
 *
 *   t234_insert(&root, key)   add a key (1 if added, 0 if already there,
 *                             -1 if out of memory)
 *   t234_find(root, key)      1 if present
 *   t234_check(root, &n)      0 if the tree is well formed (every leaf at
 *                             the same depth, keys in order, every node
 *                             of a valid kind); n = number of keys
 *   t234_free(root)
 *
 * The same code with the kind stored in each node (the "plain" version,
 * for comparison) is had by defining T234_PLAIN and T234_PREFIX before
 * including tree234_impl.h: see tree234_plain.h.
 *
 * Works with lfgc's malloc (liblfgc-malloc).  Header-only.
 */
#ifndef EXAMPLES_TREE234_H
#define EXAMPLES_TREE234_H

#define T234_PREFIX t234_
#include "tree234_impl.h"
#undef T234_PREFIX

#endif /* EXAMPLES_TREE234_H */
