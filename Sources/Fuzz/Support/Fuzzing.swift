import Foundation

#if FUZZING
import CLibFuzzer
#endif

/// What every fuzz target shares (`make fuzz`, docs/testing.md). A target is built twice:
/// normally, as a program that replays its committed seed corpus (`fuzz/corpus/<name>/`) through
/// its check, and with `-sanitize=fuzzer,address -DFUZZING`, as a libFuzzer binary whose
/// `LLVMFuzzerTestOneInput` runs the same check. A check fails with `precondition`, which the
/// fuzzer reports as a crash.
public enum Fuzzing {
    /// The input libFuzzer hands over, as bytes.
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// Runs `check` over every file of the corpus directory (the first argument, else
    /// `fuzz/corpus/<name>` below the working directory); exits 1 when there is none.
    public static func replay(_ name: String, _ check: ([UInt8]) -> Void) {
        let arguments = CommandLine.arguments.dropFirst()
        let directory = arguments.first ?? "fuzz/corpus/\(name)"
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: directory), !files.isEmpty else {
            FileHandle.standardError.write(Data("no corpus at \(directory)\n".utf8))
            exit(1)
        }
        for file in files.sorted() {
            guard let data = FileManager.default.contents(atPath: directory + "/" + file) else { continue }
            check(Array(data))
        }
        print("\(name): \(files.count) corpus inputs checked")
    }

    #if FUZZING
    /// The target's check, set by ``main(_:_:_:)`` before libFuzzer starts calling.
    // Invariant: written once, before the driver starts; libFuzzer then only reads it, from one thread.
    nonisolated(unsafe) static var check: ([UInt8]) -> Void = { _ in }

    public static func main(
        _ argc: CInt,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
        _ check: @escaping ([UInt8]) -> Void
    ) -> CInt {
        self.check = check
        var argc = argc
        var argv = argv
        // libFuzzer's driver (declared in Sources/Fuzz/CLibFuzzer), started from the program's
        // own entry point, which SwiftPM names `<module>_main`.
        return LLVMFuzzerRunDriver(&argc, &argv, fuzzOne)
    }
    #endif
}

#if FUZZING
/// libFuzzer's entry for one input (its own `main` would look for this symbol too).
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    Fuzzing.check(Fuzzing.bytes(data, size))
    return 0
}
#endif
