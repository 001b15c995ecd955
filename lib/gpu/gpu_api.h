/* The parts of NCCL's, the CUDA runtime's, NVML's and the CUDA driver's C
 * API that the smoke test calls, declared as nccl.h, cuda_runtime_api.h,
 * nvml.h and cuda.h declare them, so that the dlopen tables in load.c,
 * nvml.c and procfs.c are typed from the real prototypes
 * (__typeof__(&ncclAllReduce)).  None of these headers
 * ships in Debian; building
 * with -DNICPICK_REAL_GPU_HEADERS (tests/gpu does, on the GPU machine)
 * uses the real headers instead, so a prototype that drifted is a compile
 * error there.
 *
 * ncclConfig_t is versioned and append-only: NCCL copies min(config->size,
 * sizeof(its own)) bytes and defaults every field newer than
 * config->version (init.cc parseCommConfig).  nicpick declares the 2.14
 * prefix, the first release with non-blocking init, and says so in the
 * version field. */
#ifndef NP_GPU_API_H
#define NP_GPU_API_H

#include <stddef.h>

#ifdef NICPICK_REAL_GPU_HEADERS
#include <cuda_runtime_api.h>
#include <nccl.h>
#else

/* ---- CUDA runtime (cuda_runtime_api.h, driver_types.h) ---- */
typedef enum cudaError { cudaSuccess = 0, cudaErrorNotReady = 600 } cudaError_t;
typedef struct CUstream_st *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
struct cudaDeviceProp; /* begins with char name[256] in every release */
#define cudaStreamNonBlocking 0x01

extern cudaError_t cudaGetDeviceCount(int *count);
extern cudaError_t cudaSetDevice(int device);
extern cudaError_t cudaDriverGetVersion(int *driverVersion);
extern cudaError_t cudaRuntimeGetVersion(int *runtimeVersion);
extern cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
extern cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
extern cudaError_t cudaMalloc(void **devPtr, size_t size);
extern cudaError_t cudaFree(void *devPtr);
extern cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
extern cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags);
extern cudaError_t cudaStreamQuery(cudaStream_t stream);
extern cudaError_t cudaStreamDestroy(cudaStream_t stream);
extern const char *cudaGetErrorString(cudaError_t error);

/* ---- NCCL (nccl.h) ---- */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct ncclComm *ncclComm_t;
typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclTimeout = 8
} ncclResult_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef enum { ncclUint8 = 1, ncclFloat32 = 7 } ncclDataType_t;
typedef struct ncclConfig_v21400 {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} ncclConfig_t;

extern ncclResult_t ncclGetVersion(int *version);
extern ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
extern ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
					   int rank, ncclConfig_t *config);
extern ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
extern ncclResult_t ncclCommFinalize(ncclComm_t comm);
extern ncclResult_t ncclCommAbort(ncclComm_t comm);
extern ncclResult_t ncclCommDestroy(ncclComm_t comm);
extern ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
				  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
				  cudaStream_t stream);
extern ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
				  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
extern ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
			     ncclComm_t comm, cudaStream_t stream);
extern ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
			     ncclComm_t comm, cudaStream_t stream);
extern ncclResult_t ncclGroupStart(void);
extern ncclResult_t ncclGroupEnd(void);
extern const char *ncclGetErrorString(ncclResult_t result);
extern const char *ncclGetLastError(ncclComm_t comm);

#endif

/* nvml.h ships with the CUDA toolkit, not always beside nccl.h. */
#if defined(NICPICK_REAL_GPU_HEADERS) && __has_include(<nvml.h>)
#include <nvml.h>
#else
/* ---- NVML (nvml.h, as CUDA 13.0's toolkit ships it) ---- */
typedef enum nvmlReturn_enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_MIG_ENABLE 0x1
typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

extern nvmlReturn_t nvmlInit_v2(void);
extern nvmlReturn_t nvmlShutdown(void);
extern nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
extern nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
extern nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
extern nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
extern nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
extern nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
extern nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
					 unsigned int *pendingMode);
#endif

/* ---- the CUDA driver API (cuda.h): only its version call ---- */
#if defined(NICPICK_REAL_GPU_HEADERS) && __has_include(<cuda.h>)
#include <cuda.h>
#else
typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_STUB_LIBRARY = 34
} CUresult;
extern CUresult cuDriverGetVersion(int *driverVersion);
#endif

#define SMOKE_NCCL_API_MAGIC 0xcafebeefu
#define SMOKE_NCCL_CONFIG_VERSION 21400 /* NCCL_VERSION(2,14,0) */

#endif
