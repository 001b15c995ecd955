/* The versions step's first source: the NVIDIA driver's own files and
 * libcuda's version call, before NVML (lib/gpu/gpu.h says why).
 *
 * Measured on an H200 (driver 580.159.04, persistence mode on; docs/smoke.md):
 * reading every GPU's procfs file costs 0.3 ms and dlopen of libcuda.so.1
 * with cuDriverGetVersion 1.7 ms, where nvmlInit_v2 alone costs 13 ms of
 * CPU and each GPU's NVML handle 1.6 ms of CPU and 6.7 ms of wall.
 *
 * What is read, from NVIDIA's open-gpu-kernel-modules:
 *   - kernel-open/nvidia/nv-procfs.c nv_procfs_read_gpu_info writes
 *     /proc/driver/nvidia/gpus/<bus>/information, one "Key: \t value" a
 *     line: "Model: \t\t %s" (rm_get_device_name, the driver's name for the
 *     PCI device), "GPU UUID: \t %s", "Bus Location: \t %04x:%02x:%02x.%x",
 *     "Device Minor: \t %u", "GPU Excluded:\t %s" (Yes/No), among others;
 *   - the device node of minor m is /dev/nvidia<m>, character major 195
 *     (NV_MAJOR_DEVICE_NUMBER, kernel-open/common/inc/nv-chardev-numbers.h).
 * procfs is not a container's: under CDI (nvidia-ctk's specs edit only
 * deviceNodes) a container sees every GPU of the node there, so a GPU
 * counts only when its device node is in this container's /dev, as the
 * device plugin puts it there.
 *
 * cuDriverGetVersion is the driver API's version call, which needs no
 * cuInit (it answered 13000 without one on the H200), and it is what
 * nvmlSystemGetCudaDriverVersion_v2 returns ("The CUDA driver version by
 * calling cuDriverGetVersion()", nvml.h).
 *
 * In doubt, -1 and NVML answers (then the runtime): no procfs tree, a file
 * that does not read as above, a GPU that is not function 0, MIG (a GPU
 * instance under /proc/driver/nvidia/capabilities/gpu<m>/mig, where the
 * driver lists each as gi<N>, or a MIG- device named in
 * NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES), no GPU in this
 * container, no libcuda, or anything gpu_visible_map cannot map.  The
 * nodes of /dev/nvidia-caps are no sign of MIG: the H200 above, MIG off,
 * has nvidia-cap1 and nvidia-cap2 there, the capabilities
 * /proc/driver/nvidia/capabilities/mig/config and monitor.  Not seen from
 * here: a GPU in MIG mode without any instance, which CUDA cannot use;
 * its model is reported as a whole GPU's. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpu/gpu.h"

#define NV_MAJOR 195
#define INFO_MAX 4096 /* the file is about 400 bytes */

/* The value of "key:" at the start of a line of text, whitespace trimmed,
 * into out: 0, or 1 when no line has the key (out ""), or -1 when the key
 * is repeated or its value empty or too long for out (out ""). */
static int field(const char *text, const char *key, char *out, size_t len)
{
	size_t klen = strlen(key);
	int found = 0;
	out[0] = '\0';
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		if (n > klen && strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *v = line + klen + 1, *e = line + n;
			while (v < e && (*v == ' ' || *v == '\t'))
				v++;
			while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
				e--;
			if (found++ || e == v || (size_t)(e - v) >= len) {
				memset(out, 0, len);
				return -1;
			}
			memcpy(out, v, (size_t)(e - v));
			out[e - v] = '\0';
		}
		line = end ? end + 1 : line + n;
	}
	return found ? 0 : 1;
}

int gpu_procfs_parse(const char *text, struct gpu_procfs_gpu *g)
{
	char bus[64], minor[16], excluded[16];
	unsigned int dom, b, dev, fn;
	int used = 0;
	memset(g, 0, sizeof(*g));
	if (field(text, "Model", g->dev.name, sizeof(g->dev.name)) != 0 ||
	    field(text, "Bus Location", bus, sizeof(bus)) != 0 ||
	    field(text, "Device Minor", minor, sizeof(minor)) != 0)
		return -1;
	/* "%04x:%02x:%02x.%x", whole: nothing before, between or after. */
	if (strspn(bus, "0123456789abcdefABCDEF:.") != strlen(bus) ||
	    sscanf(bus, "%x:%x:%x.%x%n", &dom, &b, &dev, &fn, &used) != 4 || bus[used] ||
	    dom > 0xffff || b > 0xff || dev > 0x1f || fn > 7)
		return -1;
	char *end;
	errno = 0;
	unsigned long m = strtoul(minor, &end, 10);
	if (*end || errno || minor[0] == '-' || minor[0] == '+' || m > 254) /* 255: nvidiactl */
		return -1;
	/* Optional: a driver may print no UUID (nv-procfs.c: when
	 * rm_get_gpu_uuid fails) and older ones no "GPU Excluded". */
	int u = field(text, "GPU UUID", g->dev.uuid, sizeof(g->dev.uuid));
	if (u < 0 || (u == 0 && strncmp(g->dev.uuid, "GPU-", 4) != 0))
		return -1;
	int x = field(text, "GPU Excluded", excluded, sizeof(excluded));
	if (x < 0 || (x == 0 && strcmp(excluded, "Yes") != 0 && strcmp(excluded, "No") != 0))
		return -1;
	g->excluded = x == 0 && strcmp(excluded, "Yes") == 0;
	g->dev.domain = dom;
	g->dev.bus = b;
	g->dev.device = dev;
	g->function = fn;
	g->minor = (unsigned int)m;
	/* cudaDeviceGetPCIBusId's and NVML's form, upper case ("0000:1A:00.0"). */
	snprintf(g->dev.bus_id, sizeof(g->dev.bus_id), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, dom, b, dev);
	return 0;
}

static bool has_entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	bool any = false;
	for (struct dirent *e; !any && (e = readdir(d));)
		any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return any;
}

/* A file read whole into buf (NUL-terminated); -1 when it cannot be read,
 * is empty, or does not fit. */
static int slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == len - 1)
			break;
	}
	char probe;
	bool more = n == len - 1 && read(fd, &probe, 1) > 0;
	close(fd);
	buf[n] = '\0';
	return n == 0 || more || memchr(buf, '\0', n) ? -1 : 0;
}

/* This container's GPUs from root/proc and root/dev into devs; how many,
 * or -1 in doubt. */
static int procfs_gpus(const char *root, struct gpu_nvml_dev devs[GPU_NVML_MAX])
{
	char path[SMOKE_PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/proc/driver/nvidia/gpus", root);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char text[INFO_MAX];
		struct gpu_procfs_gpu g;
		struct stat st;
		snprintf(path, sizeof(path), "%s/proc/driver/nvidia/gpus/%.64s/information", root,
			 e->d_name);
		if (strlen(e->d_name) > 64 || slurp(path, text, sizeof(text)) < 0 ||
		    gpu_procfs_parse(text, &g) < 0 || g.function != 0) {
			n = -1;
			break;
		}
		snprintf(path, sizeof(path), "%s/proc/driver/nvidia/capabilities/gpu%u/mig", root, g.minor);
		if (has_entries(path)) {
			n = -1;
			break;
		}
		snprintf(path, sizeof(path), "%s/dev/nvidia%u", root, g.minor);
		if (g.excluded || stat(path, &st) < 0 || !S_ISCHR(st.st_mode) ||
		    major(st.st_rdev) != NV_MAJOR || minor(st.st_rdev) != g.minor)
			continue; /* not this container's */
		bool twice = false; /* one GPU twice: not the driver's tree */
		for (int i = 0; i < n && !twice; i++)
			twice = gpu_pci_cmp(&devs[i], &g.dev) == 0;
		if (twice || n == GPU_NVML_MAX) {
			n = -1;
			break;
		}
		devs[n++] = g.dev;
	}
	closedir(d);
	return n > 0 ? n : -1;
}

int gpu_procfs_info(const struct gpu_info_env *e, int gpu, struct smoke_result *r)
{
	/* A MIG- entry of CUDA_VISIBLE_DEVICES is refused by gpu_visible_map. */
	if (e->nvidia_visible_devices && strstr(e->nvidia_visible_devices, "MIG-"))
		return -1;
	struct gpu_nvml_dev devs[GPU_NVML_MAX];
	int n = procfs_gpus(e->driver_root ? e->driver_root : "", devs);
	size_t map[GPU_NVML_MAX];
	int count = n > 0 ? gpu_visible_map(e->visible_devices, e->device_order, devs, (size_t)n, map)
			  : -1;
	if (count < 1 || gpu < 0 || gpu >= count)
		return -1;
	/* Lazily, as info loads NCCL and cudart: only the version call runs.
	 * For libcuda it made no difference beyond the noise on the H200
	 * (whole processes, medians of 20: 2.45-2.54 against 2.52-2.59 ms). */
	void *h = dlopen(e->cuda_lib ? e->cuda_lib : "libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return -1;
	__typeof__(&cuDriverGetVersion) get;
	*(void **)&get = dlsym(h, "cuDriverGetVersion");
	int driver = 0;
	if (!get || get(&driver) != CUDA_SUCCESS || driver <= 0) {
		dlclose(h);
		return -1;
	}
	if (!e->exiting)
		dlclose(h);
	gpu_info_answer(driver, count, &devs[map[gpu]], r);
	return 0;
}
