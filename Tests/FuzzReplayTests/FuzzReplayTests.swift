import Foundation
import FuzzChecks
import Testing

/// Every input the fuzzers were ever given or found, replayed through the same checks on every test run: the
/// committed seeds (Fuzz/Seeds), the corpora the fuzzers grew and `scripts/fuzz.sh --merge` minimised
/// (Fuzz/Corpus), every crash saved (Fuzz/Crashes, kept once fixed), and Apple's fixtures. Exploring for new
/// inputs is `scripts/fuzz.sh`'s job, not the test command's.
@Suite("Fuzz inputs replayed")
struct FuzzReplayTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The inputs of `target`, by name, as scripts/fuzz.sh seeds its corpus.
    static func inputs(_ target: String) -> [(name: String, bytes: [UInt8])] {
        var inputs: [(String, [UInt8])] = []
        func add(
            _ directory: String, matching keep: (String) -> Bool = { _ in true }, transform: (Data) -> Data? = { $0 }
        ) {
            let folder = root.appendingPathComponent(directory)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            for name in names.sorted() where keep(name) {
                guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path),
                    let input = transform(data)
                else { continue }
                inputs.append(("\(directory)/\(name)", Array(input)))
            }
        }
        for directory in ["Fuzz/Seeds", "Fuzz/Corpus", "Fuzz/Crashes"] { add("\(directory)/\(target)") }
        let fixtures = "Tests/AppleVerificationTests/Fixtures"
        switch target {
        case "SignedData":
            add("\(fixtures)/mock_signed_data")
            add("\(fixtures)/xcode") { $0.hasPrefix("xcode-signed-") }
        case "VerifyReceiptResponse":
            add("\(fixtures)/receipts") { $0.hasSuffix("_response.json") }
        case "AppReceipt":
            // The fixtures are base64; the target reads DER.
            let decode: (Data) -> Data? = { Data(base64Encoded: $0, options: .ignoreUnknownCharacters) }
            add("\(fixtures)/receipts", matching: { $0.hasSuffix(".b64") }, transform: decode)
            add("\(fixtures)/hostile", matching: { $0.hasSuffix(".b64") }, transform: decode)
            add("\(fixtures)/xcode", matching: { $0.hasPrefix("xcode-app-receipt-") }, transform: decode)
        case "Properties":
            add("config") { $0.hasSuffix(".properties") }
        default:
            break
        }
        return inputs
    }

    @Test(
        "every seed, corpus entry, saved crash and fixture of each target keeps its promises",
        arguments: FuzzChecks.targets.keys.sorted())
    func replay(_ target: String) throws {
        let check = try #require(FuzzChecks.targets[target])
        FuzzChecks.prepare()
        let inputs = Self.inputs(target)
        #expect(inputs.count >= 3, "\(target): \(inputs.count) inputs; the seeds or the corpus went missing")
        for input in inputs {
            let problem = check(input.bytes)
            #expect(problem == nil, "\(input.name): \(problem ?? "")")
        }
    }
}
