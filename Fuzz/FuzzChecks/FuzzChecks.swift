import Foundation

/// What each fuzz target does with one input, in one place for the two that run it: the libFuzzer executable
/// (Fuzz/Fuzzer, one target a run by `FUZZ_TARGET`, explored by `scripts/fuzz.sh`) and the replay tests
/// (Tests/FuzzReplayTests), which run every seed, every committed corpus entry and every saved crash through it on
/// each test run. A check returns the promise an input broke (nil: none kept broken); a parser that traps crashes
/// both.
public enum FuzzChecks {
    /// The targets by name (`JobParser` is `FUZZ_TARGET=JobParser`, Fuzz/Seeds/JobParser, Fuzz/Corpus/JobParser).
    public static let targets: [String: @Sendable ([UInt8]) -> String?] = [
        "JobParser": jobParser, "SignedData": signedData, "VerifyReceiptResponse": verifyReceiptResponse,
        "AppReceipt": appReceipt, "AppleDates": appleDates, "HTTPRequestParser": httpRequestParser,
        "Properties": properties, "ConsumptionAnswer": consumptionAnswer, "DeskToken": deskToken, "JWKS": jwks,
        "Cookies": cookies, "Seal": seal, "DeskForms": deskForms, "Traceparent": traceparent,
        "OCSPResponse": ocspResponse, "ReadPlace": readPlace,
    ]

    /// The target `FUZZ_TARGET` names, for the libFuzzer executable; nil when it names none.
    public static let selected: (@Sendable ([UInt8]) -> String?)? = ProcessInfo.processInfo
        .environment["FUZZ_TARGET"].flatMap { targets[$0] }

    /// Runs the selected target's check on one input from libFuzzer: a broken promise crashes, for libFuzzer to
    /// save the input.
    public static func runSelected(_ input: UnsafeBufferPointer<UInt8>) -> CInt {
        guard let check = selected else { fatalError("FUZZ_TARGET names no fuzz target") }
        if let problem = check(Array(input)) { fatalError(problem) }
        return 0
    }

    /// Builds what the checks share (verifiers, roots) before the first input, so that no input pays for it.
    public static func prepare() {
        _ = SignedDataHarness.verifier
        _ = ReceiptHarness.verifier
        _ = DeskHarness.keys
        _ = DeskHarness.ocsp
    }
}
