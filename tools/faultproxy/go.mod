// The fault proxy of the fault-injection harness (docs/reliability.md). The standard library
// only, so it builds offline.
module chamber.io/tools/faultproxy

go 1.24.0
