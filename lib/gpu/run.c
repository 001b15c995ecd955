/* One rank of the smoke all-reduce.
 *
 * Communicator creation is non-blocking (ncclCommInitRankConfig with
 * blocking = 0) and polled with ncclCommGetAsyncError under the deadline;
 * every collective is polled the same way (cudaStreamQuery), and on a
 * timeout or error the communicator is aborted, so no step can wait past
 * the deadline.  A decoy bridge with the same address on every node makes
 * ncclCommInitRank hang forever: here that is an "init" failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu.h"
#include "util/clock.h"
#include "util/text.h"

#define POLL_US 200
#define ITERS 5

static void sleep_us(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

int gpu_device_query(const struct gpu_libs *l, int gpu, bool select, struct smoke_result *r,
		       np_error *err)
{
	const struct gpu_cuda_api *c = &l->cuda;
	r->phase = SMOKE_PHASE_DEVICE;
	c->DriverGetVersion(&r->cuda_driver);
	int count = 0;
	cudaError_t ce = c->GetDeviceCount(&count);
	if (ce != cudaSuccess || r->cuda_driver == 0) {
		/* cudaErrorInsufficientDriver (35) or cudaErrorNoDevice (100):
		 * which one depends on the container, so name both facts. */
		r->unavailable = r->cuda_driver == 0 ? SMOKE_NO_DRIVER : SMOKE_NO_GPU;
		return np_error_set(err, NP_ESMOKE, 0, "%s: %s (driver %d.%d)",
				    r->cuda_driver == 0 ? "no CUDA driver" : "no GPU visible",
				    c->GetErrorString(ce), r->cuda_driver / 1000,
				    r->cuda_driver % 1000 / 10);
	}
	r->gpu_count = count;
	if (count == 0) {
		r->unavailable = SMOKE_NO_GPU;
		return np_error_set(err, NP_ESMOKE, 0, "no GPU visible to this container");
	}
	if (gpu < 0 || gpu >= count)
		return np_error_set(err, NP_ESMOKE, 0, "GPU %d does not exist (%d visible)", gpu, count);
	ce = select ? c->SetDevice(gpu) : cudaSuccess;
	if (ce != cudaSuccess)
		return np_error_set(err, NP_ESMOKE, 0, "cudaSetDevice(%d): %s", gpu,
				    c->GetErrorString(ce));
	/* cudaDeviceProp starts with char name[256]; its size grows with
	 * every release, so give it room for any. */
	static _Alignas(16) char prop[64 * 1024];
	if (c->GetDeviceProperties((struct cudaDeviceProp *)(void *)prop, gpu) == cudaSuccess) {
		prop[255] = '\0';
		snprintf(r->gpu, sizeof(r->gpu), "%s", prop);
		np_text_clean(r->gpu, sizeof(r->gpu), r->gpu, NP_TEXT_ASCII);
	}
	if (c->DeviceGetPCIBusId(r->gpu_bus, (int)sizeof(r->gpu_bus), gpu) != cudaSuccess)
		r->gpu_bus[0] = '\0';
	np_text_clean(r->gpu_bus, sizeof(r->gpu_bus), r->gpu_bus, NP_TEXT_ASCII);
	return 0;
}

struct rank {
	const struct gpu_libs *l;
	const struct gpu_run_opts *o;
	struct smoke_result *r;
	ncclComm_t comm;
	cudaStream_t stream;
	float *dev;
	float *host;
};

static int nccl_fail(struct rank *k, ncclResult_t nr, const char *what, np_error *err)
{
	const char *last = k->comm && k->l->nccl.GetLastError ? k->l->nccl.GetLastError(k->comm) : NULL;
	return np_error_set(err, NP_ESMOKE, 0, "%s: %s%s%s", what, k->l->nccl.GetErrorString(nr),
			    last && *last ? ": " : "", last && *last ? last : "");
}

/* Wait until the communicator is no longer ncclInProgress. */
static int wait_comm(struct rank *k, const char *what, np_error *err)
{
	for (;;) {
		ncclResult_t st = ncclInProgress;
		ncclResult_t nr = k->l->nccl.CommGetAsyncError(k->comm, &st);
		if (nr != ncclSuccess)
			return nccl_fail(k, nr, what, err);
		if (st == ncclSuccess)
			return 0;
		if (st != ncclInProgress)
			return nccl_fail(k, st, what, err);
		if (np_now_ms() >= k->o->deadline_ms)
			return np_error_set(err, NP_ESMOKE, 0, "%s did not finish by the deadline", what);
		sleep_us(POLL_US);
	}
}

/* Wait for the stream, watching the communicator for errors. */
static int wait_stream(struct rank *k, const char *what, np_error *err)
{
	for (;;) {
		cudaError_t ce = k->l->cuda.StreamQuery(k->stream);
		if (ce == cudaSuccess)
			return 0;
		if (ce != cudaErrorNotReady)
			return np_error_set(err, NP_ESMOKE, 0, "%s: %s", what,
					    k->l->cuda.GetErrorString(ce));
		ncclResult_t st = ncclSuccess;
		if (k->l->nccl.CommGetAsyncError(k->comm, &st) == ncclSuccess && st != ncclSuccess &&
		    st != ncclInProgress)
			return nccl_fail(k, st, what, err);
		if (np_now_ms() >= k->o->deadline_ms)
			return np_error_set(err, NP_ESMOKE, 0, "%s did not finish by the deadline", what);
		sleep_us(POLL_US);
	}
}

static int allreduce_once(struct rank *k, size_t count, const char *what, np_error *err)
{
	ncclResult_t nr = k->l->nccl.AllReduce(k->dev, k->dev, count, ncclFloat32, ncclSum, k->comm,
					       k->stream);
	if (nr == ncclInProgress) {
		if (wait_comm(k, what, err) < 0)
			return -1;
	} else if (nr != ncclSuccess) {
		return nccl_fail(k, nr, what, err);
	}
	return wait_stream(k, what, err);
}

static int fill(struct rank *k, size_t count, np_error *err)
{
	for (size_t i = 0; i < count; i++)
		k->host[i] = gpu_input_value(k->o->rank, i);
	cudaError_t ce = k->l->cuda.Memcpy(k->dev, k->host, count * sizeof(float),
					   cudaMemcpyHostToDevice);
	if (ce != cudaSuccess)
		return np_error_set(err, NP_ESMOKE, 0, "cudaMemcpy to the GPU: %s",
				    k->l->cuda.GetErrorString(ce));
	return 0;
}

/* The ranks' mean of a time, the same on every rank (an all-reduce of one
 * float): every pod judges the same figure (nicpick's --tune compares
 * them, and each pod must take the same verdict). */
static int mean_us(struct rank *k, double *us, np_error *err)
{
	float f = (float)*us;
	cudaError_t ce = k->l->cuda.Memcpy(k->dev, &f, sizeof(f), cudaMemcpyHostToDevice);
	if (ce == cudaSuccess && allreduce_once(k, 1, "the ranks' mean time", err) < 0)
		return -1;
	if (ce == cudaSuccess)
		ce = k->l->cuda.Memcpy(&f, k->dev, sizeof(f), cudaMemcpyDeviceToHost);
	if (ce != cudaSuccess)
		return np_error_set(err, NP_ESMOKE, 0, "cudaMemcpy: %s", k->l->cuda.GetErrorString(ce));
	*us = (double)f / k->o->world;
	return 0;
}

static int size_run(struct rank *k, struct smoke_size *s, np_error *err)
{
	size_t count = (size_t)s->bytes / sizeof(float);
	char what[96], sz[32];
	smoke_size_text(s->bytes, sz, sizeof(sz));

	/* First pass: the exact check (in place, so the input is refilled). */
	k->r->phase = SMOKE_PHASE_ALLREDUCE;
	snprintf(what, sizeof(what), "all-reduce of %s", sz);
	if (fill(k, count, err) < 0 || allreduce_once(k, count, what, err) < 0)
		return -1;
	k->r->phase = SMOKE_PHASE_VERIFY;
	cudaError_t ce = k->l->cuda.Memcpy(k->host, k->dev, count * sizeof(float),
					   cudaMemcpyDeviceToHost);
	if (ce != cudaSuccess)
		return np_error_set(err, NP_ESMOKE, 0, "cudaMemcpy from the GPU: %s",
				    k->l->cuda.GetErrorString(ce));
	s->wrong = 0;
	for (size_t i = 0; i < count; i++)
		if (k->host[i] != gpu_expected_sum(k->o->world, i))
			s->wrong++;
	if (s->wrong)
		return 0; /* the verdict names it; no point timing wrong sums */

	/* Then the timing, in place from fresh inputs (the values grow with
	 * each pass; only their sum was checked, not these). */
	k->r->phase = SMOKE_PHASE_ALLREDUCE;
	if (fill(k, count, err) < 0)
		return -1;
	double t0 = np_now_us();
	for (int it = 0; it < ITERS; it++)
		if (allreduce_once(k, count, what, err) < 0)
			return -1;
	double us = (np_now_us() - t0) / ITERS;
	if (k->o->world > 1 && mean_us(k, &us, err) < 0)
		return -1;
	s->iters = ITERS;
	s->avg_us = us;
	s->algbw_gbps = us > 0 ? (double)s->bytes / (us * 1e3) : 0;
	s->busbw_gbps = s->algbw_gbps * gpu_busbw_factor(k->o->world);
	return 0;
}

/* One ring step, timed on every rank: send to rank+1, receive from rank-1.
 * A rank's time is set by its incoming link, so a slow link shows on the
 * rank behind it; an all-gather then gives every rank every figure. */
static int ring_run(struct rank *k, long bytes, np_error *err)
{
	const struct gpu_nccl_api *n = &k->l->nccl;
	int w = k->o->world, me = k->o->rank;
	size_t count = (size_t)bytes / sizeof(float);
	float *recv = NULL, *all = NULL, *mine = NULL;
	int ret = -1;
	cudaError_t ce = k->l->cuda.Malloc((void **)&recv, (size_t)bytes);
	if (ce == cudaSuccess)
		ce = k->l->cuda.Malloc((void **)&all, (size_t)w * sizeof(float) + sizeof(float));
	if (ce != cudaSuccess) {
		np_error_set(err, NP_ESMOKE, 0, "cannot allocate the ring buffers: %s",
			     k->l->cuda.GetErrorString(ce));
		goto out;
	}
	mine = all + w; /* one float after the gathered ones */
	double best = 0;
	for (int it = 0; it < 3; it++) {
		double t0 = np_now_us();
		ncclResult_t nr = n->GroupStart();
		if (nr == ncclSuccess)
			nr = n->Send(k->dev, count, ncclFloat32, (me + 1) % w, k->comm, k->stream);
		if (nr == ncclSuccess)
			nr = n->Recv(recv, count, ncclFloat32, (me + w - 1) % w, k->comm, k->stream);
		ncclResult_t ge = n->GroupEnd();
		if (nr != ncclSuccess) {
			nccl_fail(k, nr, "ring step", err);
			goto out;
		}
		if (ge == ncclInProgress ? wait_comm(k, "ring step", err) < 0
					 : ge != ncclSuccess ? nccl_fail(k, ge, "ring step", err) < 0 : 0)
			goto out;
		if (wait_stream(k, "ring step", err) < 0)
			goto out;
		double us = np_now_us() - t0;
		double gbps = us > 0 ? (double)bytes / (us * 1e3) : 0;
		if (gbps > best)
			best = gbps;
	}
	float f = (float)best;
	ce = k->l->cuda.Memcpy(mine, &f, sizeof(f), cudaMemcpyHostToDevice);
	if (ce != cudaSuccess) {
		np_error_set(err, NP_ESMOKE, 0, "cudaMemcpy: %s", k->l->cuda.GetErrorString(ce));
		goto out;
	}
	ncclResult_t nr = n->AllGather(mine, all, 1, ncclFloat32, k->comm, k->stream);
	if (nr == ncclInProgress ? wait_comm(k, "ring all-gather", err) < 0
				 : nr != ncclSuccess ? nccl_fail(k, nr, "ring all-gather", err) < 0 : 0)
		goto out;
	if (wait_stream(k, "ring all-gather", err) < 0)
		goto out;
	float *host = malloc((size_t)w * sizeof(float));
	if (!host) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "ring figures");
		goto out;
	}
	ce = k->l->cuda.Memcpy(host, all, (size_t)w * sizeof(float), cudaMemcpyDeviceToHost);
	for (int i = 0; ce == cudaSuccess && i < w; i++)
		k->r->ring_gbps[i] = host[i];
	free(host);
	if (ce != cudaSuccess) {
		np_error_set(err, NP_ESMOKE, 0, "cudaMemcpy: %s", k->l->cuda.GetErrorString(ce));
		goto out;
	}
	k->r->n_ring = (size_t)w;
	ret = 0;
out:
	if (ret == 0) {
		k->l->cuda.Free(recv);
		k->l->cuda.Free(all);
	}
	return ret;
}

int gpu_rank_run(const struct gpu_libs *l, const struct gpu_run_opts *o,
		   struct smoke_result *r, np_error *err)
{
	struct rank k = { .l = l, .o = o, .r = r };
	int64_t t0 = np_now_ms();
	int ret = -1;
	long sizes[SMOKE_SIZES_MAX];
	size_t n = gpu_plan_sizes(o->max_bytes, sizes);
	long max = sizes[n - 1];

	r->rank = o->rank;
	r->world = o->world;
	cudaError_t ce = l->cuda.StreamCreateWithFlags(&k.stream, cudaStreamNonBlocking);
	if (ce == cudaSuccess)
		ce = l->cuda.Malloc((void **)&k.dev, (size_t)max);
	if (ce != cudaSuccess) {
		np_error_set(err, NP_ESMOKE, 0, "cannot allocate %ld bytes on the GPU: %s", max,
			     l->cuda.GetErrorString(ce));
		goto out;
	}
	k.host = malloc((size_t)max);
	if (!k.host) {
		np_error_set(err, NP_EINTERNAL, ENOMEM, "cannot allocate %ld bytes", max);
		goto out;
	}

	/* NCCL_COMM_ID is set: every rank's unique id names rank 0's
	 * bootstrap root, which rank 0's init starts (bootstrap.cc). */
	r->phase = SMOKE_PHASE_INIT;
	ncclUniqueId id;
	ncclResult_t nr = l->nccl.GetUniqueId(&id);
	if (nr != ncclSuccess) {
		nccl_fail(&k, nr, "ncclGetUniqueId (is NCCL_COMM_ID valid?)", err);
		goto out;
	}
#ifdef NICPICK_REAL_GPU_HEADERS
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
#else
	ncclConfig_t cfg = { .size = sizeof(cfg),
			     .magic = SMOKE_NCCL_API_MAGIC,
			     .version = SMOKE_NCCL_CONFIG_VERSION };
#endif
	cfg.blocking = 0;
	nr = l->nccl.CommInitRankConfig(&k.comm, o->world, id, o->rank, &cfg);
	if (nr != ncclSuccess && nr != ncclInProgress) {
		nccl_fail(&k, nr, "ncclCommInitRankConfig", err);
		goto out;
	}
	if (!k.comm) {
		np_error_set(err, NP_ESMOKE, 0, "ncclCommInitRankConfig returned no communicator");
		goto out;
	}
	if (wait_comm(&k, "communicator init", err) < 0)
		goto out;
	r->init_ms = np_now_ms() - t0;

	for (size_t i = 0; i < n; i++) {
		r->sizes[i].bytes = sizes[i];
		r->n_sizes = i + 1;
		if (size_run(&k, &r->sizes[i], err) < 0)
			goto out;
		if (r->sizes[i].wrong)
			break;
	}
	if (o->world >= 3 && o->world <= SMOKE_RING_MAX && r->n_sizes && !r->sizes[r->n_sizes - 1].wrong &&
	    ring_run(&k, max < GPU_RING_BYTES ? max : GPU_RING_BYTES, err) < 0)
		goto out;
	r->phase = SMOKE_PHASE_DONE;
	ret = 0;
out:
	if (k.comm && ret == 0) {
		/* Finalize flushes what this rank still sends to its peers (the
		 * proxy may lag the stream); then destroy is local. */
		nr = l->nccl.CommFinalize(k.comm);
		if ((nr != ncclSuccess && nr != ncclInProgress) ||
		    wait_comm(&k, "communicator finalize", err) < 0) {
			if (nr != ncclSuccess && nr != ncclInProgress)
				nccl_fail(&k, nr, "ncclCommFinalize", err);
			ret = -1;
		} else {
			l->nccl.CommDestroy(k.comm);
			k.comm = NULL;
		}
	}
	if (k.comm) /* after a failure only abort is safe: it waits for nobody */
		l->nccl.CommAbort(k.comm);
	if (k.dev && ret == 0)
		l->cuda.Free(k.dev);
	if (k.stream && ret == 0)
		l->cuda.StreamDestroy(k.stream);
	free(k.host);
	r->total_ms = np_now_ms() - t0;
	for (size_t i = 0; ret == 0 && i < r->n_sizes; i++)
		if (r->sizes[i].wrong) {
			r->phase = SMOKE_PHASE_VERIFY;
			ret = np_error_set(err, NP_ESMOKE, 0, "wrong sums at %ld bytes: %ld elements",
					   r->sizes[i].bytes, r->sizes[i].wrong);
		}
	if (ret == 0)
		r->ok = true;
	return ret;
}
