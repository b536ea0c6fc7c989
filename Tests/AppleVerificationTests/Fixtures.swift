@testable import AppleVerification
import Crypto
import Foundation

/// Apple's test vectors (from the test resources of Apple's app-store-server-library), in Fixtures/.
enum Fixtures {
    static func data(_ path: String) throws -> Data {
        guard let base = Bundle.module.resourceURL else { throw FixtureError(path) }
        return try Data(contentsOf: base.appendingPathComponent("Fixtures").appendingPathComponent(path))
    }

    static func text(_ path: String) throws -> String {
        String(decoding: try data(path), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A certificate file as the base64 DER an `x5c` header holds.
    static func x5c(_ path: String) throws -> String {
        let bytes = try data(path)
        guard let der = certificatesDER(bytes).first else { throw FixtureError(path) }
        return der.base64EncodedString()
    }

    struct FixtureError: Error { let path: String; init(_ path: String) { self.path = path } }
}
