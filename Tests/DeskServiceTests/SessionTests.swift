import Crypto
@testable import DeskService
import Foundation
@testable import HTTPServerKit
import LedgerDomain
import Testing

/// The console's sessions are kept in the ledger, found by the SHA-256 of the random token their cookie carries:
/// sign-out, a lead, an idle spell and the maximum age each end one, for every replica. What waits in the browser
/// during a sign-in is sealed: nothing a browser can read or change.
@Suite("Console sessions, sealed sign-ins and cookies")
struct SessionTests {
    let seal = Seal(key: Array(repeating: 7, count: 32))!
    let store = InMemoryDeskStore()
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    static let key = Array(repeating: UInt8(7), count: 32)
    var sessions: ConsoleSessions {
        ConsoleSessions(store: store, maxAge: 8 * 3_600, idle: 1_800, sessionKey: Self.key)!
    }

    static let ana = VerifiedToken(
        subject: "ana", name: "ana@studio.test", roles: [.agent, .viewer], expiresAt: .distantFuture, nonce: nil)

    @Test("a session opens with its cookie's token only; the ledger keeps neither the token nor the CSRF token")
    func opens() async throws {
        let secret = try await sessions.start(Self.ana, now: start)
        let open = try #require(try await sessions.open(secret, now: start.addingTimeInterval(10)))
        #expect(open.agent == Agent(subject: "ana", name: "ana@studio.test", roles: [.agent, .viewer], via: .session))
        #expect(open.expiresAt == start.addingTimeInterval(8 * 3_600))
        let kept = try #require(await store.sessions.first)
        #expect(kept.id != secret && !kept.id.contains(secret) && kept.id != open.csrf && open.csrf != secret)
        // Another token, a changed character, nothing, a flood of bytes: no session.
        var changed = Array(secret)
        changed[5] = changed[5] == "A" ? "B" : "A"
        for other in [String(changed), "", String(repeating: "A", count: 10_000), "x"] {
            #expect(try await sessions.open(other, now: start) == nil)
        }
    }

    @Test(
        "a cookie no desk made opens nothing, and costs no ledger read: made up, unsigned, its MAC changed, another key's"
    )
    func forgedCookies() async throws {
        let cookie = try await sessions.start(Self.ana, now: start)
        let token = ConsoleSessions.token(ofCookie: cookie)
        var changed = Array(cookie)
        changed[changed.count - 3] = changed[changed.count - 3] == "A" ? "B" : "A"
        let otherKey = try #require(
            ConsoleSessions(
                store: InMemoryDeskStore(), maxAge: 3_600, idle: 1_800, sessionKey: Array(repeating: 8, count: 32)))
        let elsewhere = try await otherKey.start(Self.ana, now: start)
        for forged in [Random.token() + "." + Random.token(), token, token + ".", String(changed), elsewhere] {
            #expect(try await sessions.open(forged, now: start) == nil, "\(forged) opened")
        }
        #expect(await store.sessionReads == 0)
        #expect(try await sessions.open(cookie, now: start) != nil)
        #expect(await store.sessionReads == 1)
    }

    @Test("signed out, ended by a lead, idle past the limit, past its maximum age: refused")
    func ends() async throws {
        // Signed out: the same cookie replayed a moment later opens nothing.
        let signedOut = try await sessions.start(Self.ana, now: start)
        _ = await store.endSession(
            id: ConsoleSessions.id(of: ConsoleSessions.token(ofCookie: signedOut)), by: "ana",
            at: start.addingTimeInterval(60))
        #expect(try await sessions.open(signedOut, now: start.addingTimeInterval(61)) == nil)
        // A lead ends every session of the agent, and only theirs.
        let first = try await sessions.start(Self.ana, now: start)
        let second = try await sessions.start(Self.ana, now: start)
        var lee = Self.ana
        lee.subject = "lee"
        let other = try await sessions.start(lee, now: start)
        #expect(await store.endSessions(subject: "ana", by: "lee", at: start.addingTimeInterval(5)) == 2)
        #expect(try await sessions.open(first, now: start.addingTimeInterval(6)) == nil)
        #expect(try await sessions.open(second, now: start.addingTimeInterval(6)) == nil)
        #expect(try await sessions.open(other, now: start.addingTimeInterval(6)) != nil)
        // Idle: used every 20 minutes it lives on; left 31 minutes, it ends.
        let busy = try await sessions.start(Self.ana, now: start)
        for minutes in stride(from: 20, through: 120, by: 20) {
            #expect(try await sessions.open(busy, now: start.addingTimeInterval(Double(minutes) * 60)) != nil)
        }
        #expect(try await sessions.open(busy, now: start.addingTimeInterval(151 * 60)) == nil)
        // Never past its maximum age, however busy.
        let long = try await sessions.start(Self.ana, now: start)
        for minutes in stride(from: 25, through: 475, by: 25) {
            _ = try await sessions.open(long, now: start.addingTimeInterval(Double(minutes) * 60))
        }
        #expect(try await sessions.open(long, now: start.addingTimeInterval(8 * 3_600 + 1)) == nil)
    }

    @Test("a sealed sign-in state opens with its key and purpose only; any changed byte opens nothing")
    func sealing() throws {
        let state = SignInState(
            state: "s", nonce: "n", verifier: "v", expiresAt: Date(timeIntervalSince1970: 1_800_000_000))
        let sealed = try #require(seal.seal(state, purpose: SignInState.cookie))
        #expect(seal.open(SignInState.self, from: sealed, purpose: SignInState.cookie) == state)
        // Another purpose, another key, a flipped character, a cut: nothing.
        #expect(seal.open(SignInState.self, from: sealed, purpose: "another") == nil)
        #expect(Seal(key: Array(repeating: 8, count: 32))!.open(bytes: sealed, purpose: SignInState.cookie) == nil)
        var flipped = Array(sealed)
        flipped[20] = flipped[20] == "A" ? "B" : "A"
        #expect(seal.open(bytes: String(flipped), purpose: SignInState.cookie) == nil)
        #expect(seal.open(bytes: String(sealed.dropLast(3)), purpose: SignInState.cookie) == nil)
        #expect(seal.open(bytes: "", purpose: SignInState.cookie) == nil)
        #expect(seal.open(bytes: String(repeating: "A", count: 10_000), purpose: SignInState.cookie) == nil)
        // Two seals of the same state differ (a fresh nonce each).
        #expect(seal.seal(state, purpose: SignInState.cookie) != sealed)
        #expect(Seal(key: [1, 2, 3]) == nil)
    }

    @Test("cookies: __Host- names, HttpOnly, Secure, SameSite; the request's value found among others")
    func cookies() {
        let (name, value) = Cookies.set(ConsoleSessions.cookie, "abc", maxAge: 60, sameSite: "Strict")
        #expect(name == "Set-Cookie")
        #expect(value == "__Host-desk-session=abc; Path=/; Max-Age=60; Secure; HttpOnly; SameSite=Strict")
        let request = ServerRequest(
            method: "GET", path: "/", query: [:], headers: ["cookie": "a=1; __Host-desk-session=xyz; b=2"], body: Data()
        )
        #expect(Cookies.value(ConsoleSessions.cookie, in: request) == "xyz")
        #expect(Cookies.value(SignInState.cookie, in: request) == nil)
    }

    @Test("a sign-in's callback is taken once: its state again, before it expires, is refused; after, forgotten")
    func callbackTakenOnce() {
        let used = UsedSignInStates()
        let expires = start.addingTimeInterval(600)
        #expect(used.claim("state-1", until: expires, now: start))
        #expect(!used.claim("state-1", until: expires, now: start.addingTimeInterval(1)), "replayed")
        #expect(used.claim("state-2", until: expires, now: start), "another sign-in's state")
        // Expired, the sealed cookie itself is refused before this; its entry no longer holds a place.
        #expect(used.claim("state-1", until: expires.addingTimeInterval(600), now: expires.addingTimeInterval(1)))
    }

    @Test(
        "an agent past the rate: refused, the first refusal of a run told apart from the rest; let through again as it refills"
    )
    func rateRefusalsFirstOfARun() {
        let limiter = AgentLimiter(perMinute: 60)
        let now = ContinuousClock.now
        for _ in 0..<60 { #expect(limiter.take("ana", now: now) == .allowed) }
        #expect(limiter.take("ana", now: now) == .refused(first: true))
        #expect(limiter.take("ana", now: now) == .refused(first: false))
        #expect(limiter.take("ana", now: now) == .refused(first: false))
        #expect(limiter.take("bob", now: now) == .allowed, "each agent's own bucket")
        // A second later one token came back: let through, and the next refusal starts a new run.
        #expect(limiter.take("ana", now: now + .seconds(1)) == .allowed)
        #expect(limiter.take("ana", now: now + .seconds(1)) == .refused(first: true))
    }

    @Test("PKCE's S256 challenge is RFC 7636's")
    func challenge() {
        // RFC 7636, appendix B.
        #expect(
            SignInFlow.challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
                == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }
}
