import Observability
import Synchronization
import Testing

/// What a failed span carries of its error: bounded in bytes, whatever the error's text held.
@Suite struct SpanErrorTests {
    @Test("a span's error text is at most 256 bytes, however many combining marks it carried")
    func errorTextBounded() throws {
        let exported = Mutex<[FinishedSpan]>([])
        let tracer = Tracer(sampleRatio: 1) { span in exported.withLock { $0.append(span) } }
        let hostile = tracer.start("job", kind: .consumer, parent: nil)
        // A key of a job's JSON as an attacker would write it: one character, 20,001 bytes.
        hostile.fail("the key \"e" + String(repeating: "\u{301}", count: 10_000) + "\" appears twice")
        hostile.end()
        let honest = tracer.start("job", kind: .consumer, parent: nil)
        honest.fail("Apple answered HTTP 503")
        honest.end()
        let errors = exported.withLock { $0.map(\.error) }
        let first = try #require(errors.first ?? nil)
        #expect(first.utf8.count <= 256 && first.utf8.starts(with: "the key \"e\u{301}\u{301}".utf8))
        #expect(errors.last == "Apple answered HTTP 503")
    }
}
