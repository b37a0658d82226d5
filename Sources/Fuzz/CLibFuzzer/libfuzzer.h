/* libFuzzer's driver entry point, declared for Swift (compiler-rt ships no header for it).
 * Only the fuzz build (-sanitize=fuzzer) links and calls it; a normal build never references it.
 * Why: SwiftPM links every executable with `main` defined as its `<module>_main`, so libFuzzer's
 * own `main` cannot be used and the target starts the driver itself (Sources/Fuzz/Support). */
#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
