/* What one rank of the all-reduce runs and what it must get back: the
 * sizes, the values every rank contributes and their exact sums. */
#include <stddef.h>

#include "gpu/gpu.h"

size_t gpu_plan_sizes(long max_bytes, long *sizes)
{
	size_t n = 0;
	if (max_bytes < SMOKE_MIN_BYTES)
		max_bytes = SMOKE_MIN_BYTES;
	max_bytes &= ~3L; /* whole float32 elements */
	for (long b = 1L << 20; b < max_bytes && n < SMOKE_SIZES_MAX - 1; b <<= 3)
		sizes[n++] = b;
	sizes[n++] = max_bytes;
	return n;
}

/* 1..8: a sum over up to 2^20 ranks stays below 2^24, where every integer
 * is exact in float32, whatever order NCCL adds in. */
float gpu_input_value(int rank, size_t i)
{
	return (float)((i + (size_t)rank) % 8 + 1);
}

float gpu_expected_sum(int world, size_t i)
{
	/* Every full cycle of 8 ranks contributes 1+...+8 = 36. */
	long sum = (long)(world / 8) * 36;
	for (int r = world / 8 * 8; r < world; r++)
		sum += (long)((i + (size_t)r) % 8 + 1);
	return (float)sum;
}

double gpu_busbw_factor(int world)
{
	return world > 1 ? 2.0 * (world - 1) / world : 1.0;
}

int gpu_link_phase(int world, int link)
{
	if (world % 2 && link == world - 1)
		return 2;
	return link % 2;
}
