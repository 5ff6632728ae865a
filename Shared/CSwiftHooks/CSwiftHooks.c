#include "CSwiftHooks.h"

// Declared by the concurrency runtime (swift/Runtime/Concurrency.h) as a function pointer; only
// its address is taken here.
extern void *swift_task_enqueueGlobal_hook;

void **cswift_enqueue_global_hook_slot(void) {
    return &swift_task_enqueueGlobal_hook;
}
