import CLibFuzzer
import Foundation
import ReceiptWorker

/// One properties file's text, read and validated as `ConfigurationLoader.load(file:)` does with no
/// environment variables and no `--set`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let properties = try? ConfigurationLoader.properties(text: text, source: "fuzz.properties") else {
        return 0
    }
    // Keys that name files are left out: the fuzzer would open whatever path it writes (/dev/zero, a FIFO),
    // and what such a file holds is not properties text.
    let safe = properties.filter { !$0.key.hasSuffix("_file") && $0.key != "apple.root_certificates" }
    // The last value of a key wins, as in `load`.
    var seen: Set<String> = []
    let lastValues = Array(safe.reversed().filter { seen.insert($0.key).inserted }.reversed())
    _ = try? ConfigurationLoader.build(lastValues, purpose: .worker)
    _ = try? ConfigurationLoader.build(lastValues, purpose: .tool)
    return 0
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
