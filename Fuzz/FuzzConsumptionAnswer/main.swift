import CLibFuzzer
import Foundation
import ReceiptWorker

/// One value of the consumption topic (a grant service's answer to a refund request), read as the worker
/// reads it. Besides crashes: an answer that is accepted becomes a body Apple can read, a JSON object whose
/// consumption percentage is in Apple's milliunits (0 to 100,000).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let value = Array(UnsafeBufferPointer(start: data, count: size))
    let problem = ConsumptionAnswerCheck.problem(in: value)
    let body = ConsumptionAnswerCheck.appleBody(for: value)
    precondition((problem == nil) == (body != nil), "the check and the parse disagree")
    if let body {
        let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        precondition(object != nil, "an accepted answer became a body that is not a JSON object")
        if let percentage = object?["consumptionPercentage"] {
            let milliunits = (percentage as? NSNumber)?.intValue ?? -1
            precondition((0...100_000).contains(milliunits), "consumptionPercentage \(percentage) sent")
        }
    }
    return 0
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
