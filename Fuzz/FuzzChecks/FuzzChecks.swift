import Foundation

/// What each fuzz target does with one input, in one place for the two that run it: the libFuzzer executables
/// (Fuzz/Fuzz<Target>, explored by `scripts/fuzz.sh`) and the replay tests (Tests/FuzzReplayTests), which run
/// every seed, every committed corpus entry and every saved crash through it on each test run. A check returns
/// the promise an input broke (nil: none kept broken); a parser that traps crashes both.
public enum FuzzChecks {
    /// The targets by name (`JobParser` is Fuzz/FuzzJobParser, Fuzz/Seeds/JobParser, Fuzz/Corpus/JobParser).
    public static let targets: [String: @Sendable ([UInt8]) -> String?] = [
        "JobParser": jobParser, "SignedData": signedData, "VerifyReceiptResponse": verifyReceiptResponse,
        "AppReceipt": appReceipt, "AppleDates": appleDates, "HTTPRequestParser": httpRequestParser,
        "Properties": properties, "ConsumptionAnswer": consumptionAnswer, "DeskToken": deskToken, "JWKS": jwks,
        "Cookies": cookies, "Seal": seal, "DeskForms": deskForms, "Traceparent": traceparent,
        "OCSPResponse": ocspResponse, "ReadPlace": readPlace,
    ]

    /// Builds what the checks share (verifiers, roots) before the first input, so that no input pays for it.
    public static func prepare() {
        _ = SignedDataHarness.verifier
        _ = ReceiptHarness.verifier
        _ = DeskHarness.keys
        _ = DeskHarness.ocsp
    }
}
