/* The NVIDIA driver's /proc/driver/nvidia/gpus/<bus>/information, read by
 * the companion's versions step (lib/gpu/procfs.c).  Property: whatever the
 * text, gpu_procfs_parse either refuses it or gives fields in their
 * formats (a model, a GPU- UUID or none, a bus id in NVML's form that
 * matches the numbers, a minor below nvidiactl's 255), and the same
 * fields written back as the driver writes them (nv-procfs.c) read the
 * same. */
#include "fuzz.h"

#include "gpu/gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_cstr(data, size);
	struct gpu_procfs_gpu g, again;
	if (gpu_procfs_parse(s, &g) == 0) {
		char bus[sizeof(g.dev.bus_id)];
		snprintf(bus, sizeof(bus), "%04X:%02X:%02X.0", g.dev.domain, g.dev.bus, g.dev.device);
		FUZZ_CHECK(g.dev.name[0] && !strchr(g.dev.name, '\n'), "model '%s'", g.dev.name);
		FUZZ_CHECK(!g.dev.uuid[0] || !strncmp(g.dev.uuid, "GPU-", 4), "uuid '%s'", g.dev.uuid);
		FUZZ_CHECK(!strcmp(bus, g.dev.bus_id), "bus id '%s' for %s", g.dev.bus_id, bus);
		FUZZ_CHECK(g.minor < 255 && g.function < 8, "minor %u function %u", g.minor, g.function);
		static char text[1024];
		snprintf(text, sizeof(text),
			 "Model: \t\t %s\nIRQ:   \t\t 41\n%s%s%sBus Location: \t %04x:%02x:%02x.%x\n"
			 "Device Minor: \t %u\nGPU Excluded:\t %s\n",
			 g.dev.name, g.dev.uuid[0] ? "GPU UUID: \t " : "", g.dev.uuid,
			 g.dev.uuid[0] ? "\n" : "", g.dev.domain, g.dev.bus, g.dev.device, g.function,
			 g.minor, g.excluded ? "Yes" : "No");
		FUZZ_CHECK(gpu_procfs_parse(text, &again) == 0 && !memcmp(&g, &again, sizeof(g)),
			   "written back, it reads otherwise:\n%s", text);
	}
	free(s);
	return 0;
}
