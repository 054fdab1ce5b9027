// What every test controller's main does alike (flags, argument checks, exit on error). Its own
// module with no requirements, so that each controller module, whose k8s.io and
// controller-runtime versions differ, takes it through a replace directive without any version
// of its own changing.
module chamber.io/tools/workloadcontrollers/ctlmain

go 1.22
