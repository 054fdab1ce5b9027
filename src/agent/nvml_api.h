// The part of NVIDIA's NVML C API that the agent uses, declared from the public NVML API
// reference (docs.nvidia.com/deploy/nvml-api). The agent never links libnvidia-ml: it loads the
// library with dlopen and resolves these functions by name (see nvml_library.h). The fake NVML
// under fake_nvml/ implements the same declarations.
//
// Only what Chamber calls is declared. Values and layouts must match the real header exactly:
// the library reads and writes these structs.
#pragma once

// NOLINTBEGIN(modernize-use-using): C declarations, shared with the fake library.
extern "C" {

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;

// nvmlDeviceGetTemperatureThreshold: where the hardware shuts the GPU down, and where it starts
// slowing its clocks to cool it.
typedef enum nvmlTemperatureThresholds_enum {
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3
} nvmlTemperatureThresholds_t;

typedef enum nvmlMemoryErrorType_enum {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1
} nvmlEccCounterType_t;

typedef enum nvmlNvLinkErrorCounter_enum {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
  NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
} nvmlNvLinkErrorCounter_t;

typedef enum nvmlValueType_enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
} nvmlValueType_t;

// nvmlDeviceGetMigMode's current and pending modes.
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

#define NVML_NVLINK_MAX_LINKS 18
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

// Versioned structs carry sizeof(struct) | (version << 24) in their first field.
#define NVML_STRUCT_VERSION(data, ver) \
  static_cast<unsigned int>(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

// What nvmlDeviceGetComputeRunningProcesses_v2 and _v3 fill in per process (the _v1 entry point
// takes only the first two fields). usedGpuMemory is NVML_VALUE_NOT_AVAILABLE where the driver
// cannot tell (Windows WDDM; some MIG setups).
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

// One sample of nvmlDeviceGetProcessUtilization: percentages over the driver's sampling period.
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;  // microseconds since the epoch
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// Clock event reasons (nvmlClocksEventReason*; formerly nvmlClocksThrottleReason*).
#define nvmlClocksEventReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting 0x0000000000000100ULL

// Event types for nvmlDeviceRegisterEvents.
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230

typedef enum nvmlDeviceGpuRecoveryAction_s {
  NVML_GPU_RECOVERY_ACTION_NONE = 0,
  NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1,
  NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2,
  NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3,
  NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4,
} nvmlDeviceGpuRecoveryAction_t;

// GPU performance monitoring (Hopper and newer).
#define NVML_GPM_METRIC_SM_UTIL 2
#define NVML_GPM_METRIC_ANY_TENSOR_UTIL 5
// The library reads and writes only metrics[0 .. numMetrics); the array size is the caller's.
#define NVML_GPM_METRIC_MAX 98
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1

typedef struct nvmlGpmMetric_st {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
} nvmlGpmMetric_t;

typedef struct nvmlGpmMetricsGet_st {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct nvmlGpmSupport_st {
  unsigned int version;
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

}  // extern "C"
// NOLINTEND(modernize-use-using)

// Function types, one per symbol the agent resolves. Versioned symbols and their older
// fallbacks share a type where the signature is the same.
namespace chamber::agent::nvml_fn {
using Init = nvmlReturn_t();
using Shutdown = nvmlReturn_t();
using ErrorString = const char*(nvmlReturn_t);
using SystemGetDriverVersion = nvmlReturn_t(char*, unsigned int);
using SystemGetCudaDriverVersion = nvmlReturn_t(int*);
using DeviceGetCount = nvmlReturn_t(unsigned int*);
using DeviceGetHandleByIndex = nvmlReturn_t(unsigned int, nvmlDevice_t*);
using DeviceGetString = nvmlReturn_t(nvmlDevice_t, char*, unsigned int);
using DeviceGetMemoryInfo = nvmlReturn_t(nvmlDevice_t, nvmlMemory_t*);
using DeviceGetMemoryInfoV2 = nvmlReturn_t(nvmlDevice_t, nvmlMemory_v2_t*);
using DeviceGetPciInfo = nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_t*);
using DeviceGetUtilizationRates = nvmlReturn_t(nvmlDevice_t, nvmlUtilization_t*);
using DeviceGetUint = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using DeviceGetTemperature = nvmlReturn_t(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*);
using DeviceGetTemperatureThreshold = nvmlReturn_t(nvmlDevice_t, nvmlTemperatureThresholds_t,
                                                   unsigned int*);
using DeviceGetUll = nvmlReturn_t(nvmlDevice_t, unsigned long long*);
using DeviceGetTotalEccErrors = nvmlReturn_t(nvmlDevice_t, nvmlMemoryErrorType_t,
                                             nvmlEccCounterType_t, unsigned long long*);
using DeviceGetRemappedRows = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*,
                                           unsigned int*, unsigned int*);
using DeviceGetNvLinkState = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
using DeviceGetNvLinkErrorCounter = nvmlReturn_t(nvmlDevice_t, unsigned int,
                                                 nvmlNvLinkErrorCounter_t, unsigned long long*);
using DeviceGetMigMode = nvmlReturn_t(nvmlDevice_t, unsigned int*, unsigned int*);
using DeviceGetMigDeviceHandleByIndex = nvmlReturn_t(nvmlDevice_t, unsigned int, nvmlDevice_t*);
// nvmlDeviceGetGpuInstanceId and nvmlDeviceGetComputeInstanceId: the ids of a MIG device handle
// (NVML_ERROR_INVALID_ARGUMENT for a whole GPU's handle).
using DeviceGetInstanceId = nvmlReturn_t(nvmlDevice_t, unsigned int*);
using DeviceGetFieldValues = nvmlReturn_t(nvmlDevice_t, int, nvmlFieldValue_t*);
using EventSetCreate = nvmlReturn_t(nvmlEventSet_t*);
using DeviceRegisterEvents = nvmlReturn_t(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
using EventSetWait = nvmlReturn_t(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
using EventSetFree = nvmlReturn_t(nvmlEventSet_t);
using DeviceGetProcesses = nvmlReturn_t(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using DeviceGetProcessUtilization = nvmlReturn_t(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                                 unsigned int*, unsigned long long);
using GpmQueryDeviceSupport = nvmlReturn_t(nvmlDevice_t, nvmlGpmSupport_t*);
using GpmSampleAlloc = nvmlReturn_t(nvmlGpmSample_t*);
using GpmSampleFree = nvmlReturn_t(nvmlGpmSample_t);
using GpmSampleGet = nvmlReturn_t(nvmlDevice_t, nvmlGpmSample_t);
using GpmMetricsGet = nvmlReturn_t(nvmlGpmMetricsGet_t*);
}  // namespace chamber::agent::nvml_fn
