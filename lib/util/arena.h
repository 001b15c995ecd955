/* A bump allocator for jansson while one large JSON document is built,
 * written and dropped: `discover --json` on a node with a thousand
 * interfaces makes tens of thousands of small objects, and malloc/free of
 * each cost more than building the document itself. */
#ifndef NP_ARENA_H
#define NP_ARENA_H

/* Route jansson's allocations into an arena until np_json_arena_end(),
 * which releases all of it at once: documents built in between need no
 * json_decref (walking a large tree to free it is most of the cost), and
 * nothing jansson allocated in between may be used after the end. */
void np_json_arena_begin(void);
void np_json_arena_end(void);
/* Drop everything allocated since np_json_arena_begin() and start over in
 * the same memory: a stream of documents then touches no new page. */
void np_json_arena_reset(void);

#endif
