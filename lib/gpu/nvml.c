/* The versions step without a CUDA context: the driver, the GPUs and the
 * model from NVML (lib/gpu/gpu.h says why).
 *
 * What each call does, from nvml.h (CUDA 13.0's toolkit, driver 580):
 *   - nvmlInit_v2 "Initialize NVML, but don't initialize any GPUs yet";
 *     it fails with NVML_ERROR_DRIVER_NOT_LOADED "if NVIDIA driver is not
 *     running" (and when no GPU is found: NVML_INIT_FLAG_NO_GPUS "Don't
 *     fail nvmlInit() when no GPUs are found");
 *   - nvmlSystemGetCudaDriverVersion_v2 returns "The CUDA driver version by
 *     calling cuDriverGetVersion()", NVML_ERROR_LIBRARY_NOT_FOUND "if
 *     libcuda.so.1 ... is not found": the figure cudaDriverGetVersion gives;
 *   - nvmlDeviceGetCount_v2 "returns count of all devices in the system even
 *     if nvmlDeviceGetHandleByIndex_v2 returns NVML_ERROR_NO_PERMISSION for
 *     such device", and "The NVML index may not correlate with other APIs,
 *     such as the CUDA device index";
 *   - NVML knows nothing of CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER.
 * Any failure, any device NVML may not talk to, MIG, or a
 * CUDA_VISIBLE_DEVICES that is not a plain list: the runtime answers
 * (gpu_device_query), so that nothing the runtime accepts is refused and
 * every error reads as it did. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"
#include "util/text.h"

struct nvml_api {
	__typeof__(&nvmlInit_v2) Init_v2;
	__typeof__(&nvmlShutdown) Shutdown;
	__typeof__(&nvmlSystemGetCudaDriverVersion_v2) SystemGetCudaDriverVersion_v2;
	__typeof__(&nvmlDeviceGetCount_v2) DeviceGetCount_v2;
	__typeof__(&nvmlDeviceGetHandleByIndex_v2) DeviceGetHandleByIndex_v2;
	__typeof__(&nvmlDeviceGetName) DeviceGetName;
	__typeof__(&nvmlDeviceGetPciInfo_v3) DeviceGetPciInfo_v3;
	__typeof__(&nvmlDeviceGetUUID) DeviceGetUUID;
	__typeof__(&nvmlDeviceGetMigMode) DeviceGetMigMode; /* optional: drivers before MIG lack it */
};

int gpu_pci_cmp(const struct gpu_nvml_dev *a, const struct gpu_nvml_dev *b)
{
	if (a->domain != b->domain)
		return a->domain < b->domain ? -1 : 1;
	if (a->bus != b->bus)
		return a->bus < b->bus ? -1 : 1;
	return a->device < b->device ? -1 : a->device > b->device;
}

bool gpu_visible_by_uuid(const char *visible)
{
	for (const char *p = visible; p && *p;) {
		if (strncmp(p, "GPU-", 4) == 0)
			return true;
		const char *c = strchr(p, ',');
		p = c ? c + 1 : NULL;
	}
	return false;
}

/* The CUDA programming guide (13.x, 5.2.1 "Device Enumeration and
 * Properties"): CUDA_VISIBLE_DEVICES unset, all GPUs are visible; empty,
 * none; else "a comma-separated sequence of GPU identifiers", integer
 * indices or "GPU UUID strings ... as given by nvidia-smi -L", where
 * "abbreviated forms are allowed" (a prefix that is unique), enumerated in
 * the order of the sequence; "If an invalid index is encountered, only
 * devices with indices that appear before the invalid index in the list
 * are visible"; MIG devices as MIG-<UUID>.  CUDA_DEVICE_ORDER: FASTEST_FIRST
 * (the default, "a simple heuristic") or PCI_BUS_ID ("ascending order").
 *
 * Mapped here: the plain index list and the (abbreviated) GPU UUID list,
 * in PCI bus order.  PCI_BUS_ID is that order by definition; under
 * FASTEST_FIRST only GPUs that are all the same model, which the heuristic
 * cannot rank (then the model named is the same whichever comes first; the
 * bus id assumes the driver keeps PCI order among equals, as it does on
 * nvidia-smi's numbering that the guide equates with the indices).  In
 * doubt, -1: an empty list, an invalid, repeated or out-of-range entry,
 * MIG, an ambiguous or unknown UUID, mixed models without PCI_BUS_ID, an
 * unknown order. */
int gpu_visible_map(const char *visible, const char *order, const struct gpu_nvml_dev *devs,
		      size_t n, size_t map[GPU_NVML_MAX])
{
	if (n == 0 || n > GPU_NVML_MAX)
		return -1;
	bool pci = order && strcmp(order, "PCI_BUS_ID") == 0;
	if (order && *order && !pci && strcmp(order, "FASTEST_FIRST") != 0)
		return -1;
	for (size_t i = 1; !pci && i < n; i++)
		if (strcmp(devs[i].name, devs[0].name) != 0)
			return -1;
	size_t all[GPU_NVML_MAX];
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		for (; j > 0 && gpu_pci_cmp(&devs[all[j - 1]], &devs[i]) > 0; j--)
			all[j] = all[j - 1];
		all[j] = i;
	}
	if (!visible) {
		memcpy(map, all, n * sizeof(all[0]));
		return (int)n;
	}
	if (!*visible)
		return -1;
	size_t k = 0;
	for (const char *p = visible;;) {
		size_t len = strcspn(p, ",");
		size_t digits = strspn(p, "0123456789");
		size_t pick = n;
		if (len == 0 || k == GPU_NVML_MAX)
			return -1;
		if (digits == len) {
			if (len > 1 && p[0] == '0')
				return -1;
			size_t v = 0;
			for (size_t i = 0; i < len && v < n; i++)
				v = v * 10 + (size_t)(p[i] - '0');
			if (v >= n)
				return -1;
			pick = all[v];
		} else if (len > 4 && strncmp(p, "GPU-", 4) == 0) {
			for (size_t i = 0; i < n; i++) {
				if (!devs[i].uuid[0] || strncmp(devs[i].uuid, p, len) != 0)
					continue;
				if (pick != n)
					return -1; /* ambiguous */
				pick = i;
			}
			if (pick == n)
				return -1;
		} else {
			return -1;
		}
		for (size_t j = 0; j < k; j++)
			if (map[j] == pick)
				return -1;
		map[k++] = pick;
		if (!p[len])
			break;
		p += len + 1;
	}
	return (int)k;
}

/* What info reports from NVML, copied into the result only when complete. */
struct nvml_answer {
	int driver, count;
	const struct gpu_nvml_dev *dev;
};

static int nvml_query(const struct nvml_api *m, const struct gpu_info_env *e, int gpu,
		      struct gpu_nvml_dev devs[GPU_NVML_MAX], struct nvml_answer *a)
{
	int driver = 0;
	unsigned int n = 0;
	if (m->SystemGetCudaDriverVersion_v2(&driver) != NVML_SUCCESS || driver <= 0)
		return -1;
	if (m->DeviceGetCount_v2(&n) != NVML_SUCCESS || n == 0 || n > GPU_NVML_MAX)
		return -1;
	bool uuids = gpu_visible_by_uuid(e->visible_devices);
	for (unsigned int i = 0; i < n; i++) {
		struct gpu_nvml_dev *d = &devs[i];
		nvmlDevice_t h;
		nvmlPciInfo_t pci;
		memset(d, 0, sizeof(*d));
		memset(&pci, 0, sizeof(pci));
		if (m->DeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS ||
		    m->DeviceGetPciInfo_v3(h, &pci) != NVML_SUCCESS ||
		    m->DeviceGetName(h, d->name, sizeof(d->name)) != NVML_SUCCESS ||
		    (uuids && m->DeviceGetUUID(h, d->uuid, sizeof(d->uuid)) != NVML_SUCCESS))
			return -1;
		d->name[sizeof(d->name) - 1] = d->uuid[sizeof(d->uuid) - 1] = '\0';
		if (m->DeviceGetMigMode) {
			unsigned int cur = 0, pending = 0;
			nvmlReturn_t mr = m->DeviceGetMigMode(h, &cur, &pending);
			if (mr == NVML_SUCCESS ? cur == NVML_DEVICE_MIG_ENABLE : mr != NVML_ERROR_NOT_SUPPORTED)
				return -1;
		}
		d->domain = pci.domain;
		d->bus = pci.bus;
		d->device = pci.device;
		/* busIdLegacy is NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, "%04X:%02X:%02X.0":
		 * cudaDeviceGetPCIBusId's form ("0000:00:06.0" from both on the H200). */
		pci.busIdLegacy[sizeof(pci.busIdLegacy) - 1] = '\0';
		if (pci.busIdLegacy[0])
			snprintf(d->bus_id, sizeof(d->bus_id), "%s", pci.busIdLegacy);
		else
			snprintf(d->bus_id, sizeof(d->bus_id), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
				 pci.domain & 0xffff, pci.bus & 0xff, pci.device & 0xff);
	}
	size_t map[GPU_NVML_MAX];
	int count = gpu_visible_map(e->visible_devices, e->device_order, devs, n, map);
	if (count < 1 || gpu < 0 || gpu >= count)
		return -1; /* the runtime names what is wrong, as before */
	a->driver = driver;
	a->count = count;
	a->dev = &devs[map[gpu]];
	return 0;
}

void gpu_info_answer(int driver, int count, const struct gpu_nvml_dev *d, struct smoke_result *r)
{
	r->cuda_driver = driver;
	r->gpu_count = count;
	np_text_clean(r->gpu, sizeof(r->gpu), d->name, NP_TEXT_ASCII);
	np_text_clean(r->gpu_bus, sizeof(r->gpu_bus), d->bus_id, NP_TEXT_ASCII);
}

/* 0 when NVML answered (r filled), -1 when the runtime must. */
static int nvml_info(const struct gpu_info_env *e, int gpu, struct smoke_result *r)
{
	void *h = dlopen(e->nvml_lib ? e->nvml_lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	static const char *const names[] = {
		"nvmlInit_v2",		   "nvmlShutdown",	"nvmlSystemGetCudaDriverVersion_v2",
		"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName",
		"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetUUID", "nvmlDeviceGetMigMode",
	};
	_Static_assert(sizeof(names) / sizeof(names[0]) == sizeof(struct nvml_api) / sizeof(void *),
		       "one name per NVML slot");
	struct nvml_api m;
	size_t n = sizeof(names) / sizeof(names[0]);
	np_error lerr = { 0 }; /* a missing symbol: the runtime answers */
	bool ok = gpu_load_syms(h, "libnvidia-ml", names, (void **)&m, n - 1, n, &lerr) == 0;
	int ret = -1;
	if (ok && m.Init_v2() == NVML_SUCCESS) {
		struct gpu_nvml_dev devs[GPU_NVML_MAX];
		struct nvml_answer a;
		ret = nvml_query(&m, e, gpu, devs, &a);
		if (ret == 0)
			gpu_info_answer(a.driver, a.count, a.dev, r);
		if (ret == 0 && e->exiting)
			return 0; /* the process's exit shuts NVML down */
		m.Shutdown();
	}
	dlclose(h);
	return ret;
}

int gpu_device_info(const struct gpu_libs *l, const struct gpu_info_env *e, int gpu,
		      struct smoke_result *r, np_error *err)
{
	r->phase = SMOKE_PHASE_DEVICE;
	if (gpu_procfs_info(e, gpu, r) == 0 || nvml_info(e, gpu, r) == 0)
		return 0;
	return gpu_device_query(l, gpu, false, r, err);
}
