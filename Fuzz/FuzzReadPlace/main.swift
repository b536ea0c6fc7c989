import CLibFuzzer
import Foundation
import FuzzChecks

/// libFuzzer's entry: the check of ``FuzzChecks/readPlace(_:)``, which the replay tests run too; a broken promise
/// is a crash libFuzzer saves.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let problem = FuzzChecks.readPlace(Array(UnsafeBufferPointer(start: data, count: size))) {
        fatalError(problem)
    }
    return 0
}

// Made before fuzzing starts, so that no run pays for it (Fuzz/lsan.supp says why LeakSanitizer ignores it).
FuzzChecks.prepare()

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
