import CLibFuzzer
import Foundation
import FuzzChecks

/// libFuzzer's entry: the check `FUZZ_TARGET` names in ``FuzzChecks/targets``, which the replay tests run too; a
/// broken promise is a crash libFuzzer saves.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzChecks.runSelected(UnsafeBufferPointer(start: data, count: size))
}

guard FuzzChecks.selected != nil else {
    let names = FuzzChecks.targets.keys.sorted().joined(separator: " ")
    FileHandle.standardError.write(Data("Fuzzer: set FUZZ_TARGET to one of: \(names)\n".utf8))
    exit(2)
}
// Made before fuzzing starts, so that no run pays for it (Fuzz/lsan.supp says why LeakSanitizer ignores it).
FuzzChecks.prepare()

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
