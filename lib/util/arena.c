#include "util/arena.h"

#include <jansson.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>

#define CHUNK (1u << 20)

struct chunk {
	struct chunk *next;
	size_t used, size;
	alignas(max_align_t) unsigned char data[];
};

static struct chunk *head;
/* The functions in place before the arena (the budget's counter, when
 * cmd/ installed it: util/jsonmem.h), put back at its end. */
static json_malloc_t saved_malloc;
static json_free_t saved_free;

static void *arena_malloc(size_t n)
{
	n = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
	if (!head || head->size - head->used < n) {
		size_t size = n > CHUNK ? n : CHUNK;
		struct chunk *c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->next = head;
		c->used = 0;
		c->size = size;
		head = c;
	}
	void *p = head->data + head->used;
	head->used += n;
	return p;
}

static void arena_free(void *p)
{
	(void)p; /* released with the arena */
}

void np_json_arena_begin(void)
{
	json_get_alloc_funcs(&saved_malloc, &saved_free);
	json_set_alloc_funcs(arena_malloc, arena_free);
}

void np_json_arena_end(void)
{
	json_set_alloc_funcs(saved_malloc ? saved_malloc : malloc, saved_free ? saved_free : free);
	while (head) {
		struct chunk *next = head->next;
		free(head);
		head = next;
	}
}

void np_json_arena_reset(void)
{
	/* Keep the newest chunk (the largest in use), free the rest. */
	while (head && head->next) {
		struct chunk *next = head->next;
		head->next = next->next;
		free(next);
	}
	if (head)
		head->used = 0;
}
