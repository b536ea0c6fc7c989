import Foundation
@testable import HTTPServerKit
import Testing

@testable import DeskService

/// The console's session and sign-in state live in sealed cookies: nothing a browser can read or change.
@Suite("Sealed sessions and cookies")
struct SessionTests {
    let seal = Seal(key: Array(repeating: 7, count: 32))!

    @Test("a sealed session opens with its key and purpose only; any changed byte opens nothing")
    func sealing() throws {
        let session = ConsoleSession(
            subject: "ana", name: "ana@studio.test", roles: [.agent, .viewer],
            expiresAt: Date(timeIntervalSince1970: 1_800_000_000), csrf: "c")
        let sealed = try #require(seal.seal(session, purpose: ConsoleSession.cookie))
        #expect(seal.open(ConsoleSession.self, from: sealed, purpose: ConsoleSession.cookie) == session)
        // Nothing of it reads as text.
        #expect(!sealed.contains("ana") && !sealed.contains("agent"))
        // Another purpose (the sign-in's cookie), another key, a flipped character, a cut: nothing.
        #expect(seal.open(ConsoleSession.self, from: sealed, purpose: SignInState.cookie) == nil)
        #expect(Seal(key: Array(repeating: 8, count: 32))!.open(bytes: sealed, purpose: ConsoleSession.cookie) == nil)
        var flipped = Array(sealed)
        flipped[20] = flipped[20] == "A" ? "B" : "A"
        #expect(seal.open(bytes: String(flipped), purpose: ConsoleSession.cookie) == nil)
        #expect(seal.open(bytes: String(sealed.dropLast(3)), purpose: ConsoleSession.cookie) == nil)
        #expect(seal.open(bytes: "", purpose: ConsoleSession.cookie) == nil)
        #expect(seal.open(bytes: String(repeating: "A", count: 10_000), purpose: ConsoleSession.cookie) == nil)
        // Two seals of the same session differ (a fresh nonce each).
        #expect(seal.seal(session, purpose: ConsoleSession.cookie) != sealed)
        #expect(Seal(key: [1, 2, 3]) == nil)
    }

    @Test("cookies: __Host- names, HttpOnly, Secure, SameSite; the request's value found among others")
    func cookies() {
        let (name, value) = Cookies.set(ConsoleSession.cookie, "abc", maxAge: 60, sameSite: "Strict")
        #expect(name == "Set-Cookie")
        #expect(value == "__Host-desk-session=abc; Path=/; Max-Age=60; Secure; HttpOnly; SameSite=Strict")
        let request = ServerRequest(
            method: "GET", path: "/", query: [:], headers: ["cookie": "a=1; __Host-desk-session=xyz; b=2"], body: Data()
        )
        #expect(Cookies.value(ConsoleSession.cookie, in: request) == "xyz")
        #expect(Cookies.value(SignInState.cookie, in: request) == nil)
    }

    @Test("PKCE's S256 challenge is RFC 7636's")
    func challenge() {
        // RFC 7636, appendix B.
        #expect(
            SignInFlow.challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }
}
