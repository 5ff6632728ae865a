#ifndef CSWIFTHOOKS_H
#define CSWIFTHOOKS_H

/// The address of the Swift runtime's `swift_task_enqueueGlobal_hook` variable. Linked, not
/// looked up with dlsym: a binary built with `--static-swift-stdlib` (the Dockerfile's) does not
/// export the runtime's symbols, so a lookup finds nothing there.
void **cswift_enqueue_global_hook_slot(void);

#endif
