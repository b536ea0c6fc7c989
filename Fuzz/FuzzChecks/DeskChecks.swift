import AppleVerification
import Crypto
import DeskService
import Foundation
import Observability

extension FuzzChecks {
    /// A sign-in provider's token, as the desk reads and verifies one (a bearer token on every API request, an ID
    /// token at sign-in), against the provider's keys of the harness: whatever the bytes, a ``TokenRefusal`` or a
    /// verified token whose claims are the desk's issuer, audience and a plain subject. Bytes nobody signed never
    /// verify.
    @Sendable public static func deskToken(_ bytes: [UInt8]) -> String? {
        let token = String(decoding: bytes, as: UTF8.self)
        for nonce in [nil, "n-1"] {
            do {
                let parsed = try TokenVerifier.parse(token)
                let verified = try DeskHarness.verifier.verify(
                    parsed, with: DeskHarness.keys[parsed.kid], now: DeskHarness.now, nonce: nonce)
                guard DeskText.isPlain(verified.subject, maxBytes: 255), DeskText.isPlain(verified.name, maxBytes: 255)
                else { return "a verified token names a subject or a name that is not plain text" }
            } catch {
                // Typed: a TokenRefusal, whose words reach a 401 and a log.
                if !DeskText.isPlain(error.description, maxBytes: 400) {
                    return "a refusal's words are not plain text: they would reach a 401 and a log"
                }
            }
        }
        return nil
    }

    /// A provider's JWKS document, as the desk reads one: at most 64 entries read, each key usable for its
    /// algorithm, every other entry skipped; never a key from anything but a JWK's numbers.
    @Sendable public static func jwks(_ bytes: [UInt8]) -> String? {
        guard let keys = (try? JSONDecoder().decode(JWKS.self, from: Data(bytes)))?.signingKeys else { return nil }
        if keys.count > 64 { return "\(keys.count) keys read from one JWKS (at most 64)" }
        if keys.keys.contains(where: { !(1...256).contains($0.utf8.count) }) { return "a key id of a length refused" }
        return nil
    }

    /// A `Cookie` header from a browser, or anyone: the value found for the console's session is a part of the
    /// header between `=` and `;` (never across a pair), and a header past 16 KiB is not read.
    @Sendable public static func cookies(_ bytes: [UInt8]) -> String? {
        let header = String(decoding: bytes, as: UTF8.self)
        guard let value = Cookies.value("__Host-desk-session", inHeader: header) else { return nil }
        if header.utf8.count > 16_384 { return "a Cookie header of \(header.utf8.count) bytes was read" }
        if value.contains(";") { return "a cookie's value runs across a pair" }
        if !header.contains("__Host-desk-session=" + value) { return "a value that is not the session cookie's" }
        return nil
    }

    /// What a browser sends back as a sealed sign-in state: bytes not sealed under the desk's key for this purpose
    /// never open (AES-256-GCM's tag), whatever their shape.
    @Sendable public static func seal(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let opened = DeskHarness.seal.open(bytes: text, purpose: "__Host-desk-signin") {
            return "\(opened.count) bytes opened from input the desk never sealed"
        }
        return nil
    }

    /// A body of the desk's API, read as each form: refused with plain words, or accepted with every field checked;
    /// a credit held for a lead is kept as JSON and read back at its approval: it must read back the same, by the
    /// strict form and by the decoder.
    @Sendable public static func deskForms(_ bytes: [UInt8]) -> String? {
        let body = Data(bytes)
        func refusal(_ error: BadRequest) -> String? {
            DeskText.isPlain(error.reason, maxBytes: 400) ? nil : "a 400's reason is not plain text"
        }
        do {
            let credit = try CreditForm(body)
            let kept = Data(credit.json.utf8)
            guard (try? CreditForm(kept)) == credit, (try? JSONDecoder().decode(CreditForm.self, from: kept)) == credit
            else { return "a credit held for a lead does not read back as itself" }
        } catch {
            if let problem = refusal(error) { return problem }
        }
        do {
            let lookup = try LookupForm(body)
            if !DeskText.isTicket(lookup.ticket) { return "a lookup accepted with a ticket that is not one" }
        } catch {
            if let problem = refusal(error) { return problem }
        }
        for rejecting in [false, true] {
            do {
                let decision = try DecisionForm(body, rejecting: rejecting)
                if !DeskText.isTicket(decision.ticket) { return "a decision accepted with a ticket that is not one" }
            } catch {
                if let problem = refusal(error) { return problem }
            }
        }
        return nil
    }

    /// A `traceparent` header from a job or anyone, read by the one parser: accepted exactly when the W3C rules
    /// (checked here the long way) say so, and what it reads renders back to a header that reads the same.
    @Sendable public static func traceparent(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = SpanContext(traceparent: text)
        if (parsed != nil) != W3CTraceparent.isValid(Array(text.utf8)) {
            return parsed == nil ? "a valid traceparent refused" : "an invalid traceparent accepted"
        }
        if let parsed, SpanContext(traceparent: parsed.traceparent) != parsed {
            return "a traceparent rendered back does not read the same"
        }
        return nil
    }

    /// An OCSP responder's answer about Apple's real signing certificate: unless Apple's responder signed it (and
    /// nothing here is), it is never `good`, `revoked` or `unknown`; only `untrusted`.
    @Sendable public static func ocspResponse(_ bytes: [UInt8]) -> String? {
        guard let query = DeskHarness.ocsp else { return "the OCSP harness did not start" }
        switch query.answer(Data(bytes), issuer: DeskHarness.intermediate!, roots: DeskHarness.roots) {
        case .untrusted: return nil
        case let answer: return "an answer nobody signed was trusted: \(answer)"
        }
    }
}

/// The W3C rules of a `traceparent`, written the long way (a second reading to hold the parser to).
enum W3CTraceparent {
    static func isValid(_ bytes: [UInt8]) -> Bool {
        let hex = Set("0123456789abcdef".utf8)
        func field(_ start: Int, _ count: Int) -> [UInt8]? {
            guard bytes.count >= start + count else { return nil }
            let part = Array(bytes[start..<(start + count)])
            return part.allSatisfy(hex.contains) ? part : nil
        }
        guard bytes.count <= 512, let version = field(0, 2), version != Array("ff".utf8),
            bytes.count >= 55, bytes[2] == UInt8(ascii: "-"), let trace = field(3, 32), bytes[35] == UInt8(ascii: "-"),
            let parent = field(36, 16), bytes[52] == UInt8(ascii: "-"), field(53, 2) != nil
        else { return false }
        let zero = UInt8(ascii: "0")
        guard trace.contains(where: { $0 != zero }), parent.contains(where: { $0 != zero }) else { return false }
        if version == Array("00".utf8) { return bytes.count == 55 }
        return bytes.count == 55 || bytes[55] == UInt8(ascii: "-")
    }
}

/// What the desk's checks share, made once.
enum DeskHarness {
    static let now = Date(timeIntervalSince1970: 1_800_000_600)
    static let verifier = TokenVerifier(
        issuer: "https://sso.studio.test", audience: "support-desk", authorizedParties: ["support-desk"])
    /// Apple's test P-256 key as the provider's `ec-1` (the seeds' valid token is signed with its private half).
    static let keys: [String: SigningKey] = {
        func bytes(_ text: String) -> [UInt8] { Base64URL.decodeBytes(Substring(text)) ?? [] }
        guard
            let key = SigningKey(
                p256X: bytes("rPJyxEu2_oKCrJaaTVTrq39DKJ2XcN6W-k8UvGf-Y_k"),
                y: bytes("Q1jWxYrUKHGm7A1L0jdHnRx91Cj-UD08-HDpciDzK10"))
        else { return [:] }
        return ["ec-1": key]
    }()
    static let seal = Seal(key: Array(repeating: 7, count: 32))!

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Tests/AppleVerificationTests/Fixtures/chain").standardized
    static let intermediate = try? X509Certificate(
        bytes: Data(contentsOf: fixtures.appendingPathComponent("real_apple_intermediate.der")))
    static let roots = [try? X509Certificate(bytes: AppleRootCertificates.appleRootCAG3)].compactMap { $0 }
    /// Apple's real signing certificate's query (its responder named in the certificate).
    static let ocsp: OCSPQuery? = {
        guard
            let leaf = try? X509Certificate(
                bytes: Data(contentsOf: fixtures.appendingPathComponent("real_apple_signing_certificate.der"))),
            let intermediate
        else { return nil }
        return OCSPQuery(certificate: leaf, issuer: intermediate)
    }()
}
