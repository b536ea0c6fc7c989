import Foundation
import HTTPClient
import Observability
import Synchronization

// What tracing costs a job in the worker's own code, apart from the noise of a whole worker: the eight spans of a
// sampled job made as the runtime, the handlers and the layers beneath make them (a `process` root with its messaging
// attributes, current while the handler runs; Apple's call and its HTTP exchange; the ledger's two round trips and
// their batches; the `send` of its event), ended, queued, and encoded as OTLP in requests of 512 spans; and the same
// job unsampled (its spans draw ids and record nothing; the layers make none). With tracing off (no `otel.endpoint`)
// no span is made at all: these are what tracing adds to a job. CPU time of this process, one thread.
//   span-bench [--jobs N]        (default 200000)

func cpuMicroseconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Double(now.tv_sec) * 1e6 + Double(now.tv_nsec) / 1e3
}

/// What a sampled job makes.
let spansPerJob = 8

let arguments = CommandLine.arguments
let jobs = arguments.firstIndex(of: "--jobs").flatMap { Int(arguments[$0 + 1]) } ?? 200_000

/// The exporter's part: a queue, taken 512 at a time and encoded.
final class Queue: Sendable {
    let spans = Mutex<[FinishedSpan]>([])
    let bytes = Atomic<Int>(0)

    func add(_ span: FinishedSpan) {
        let full = spans.withLock { queue -> [FinishedSpan]? in
            queue.append(span)
            guard queue.count >= 512 else { return nil }
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        if let full {
            let body = OTLPEncoding.exportRequest(full, service: "receipt-worker", version: "bench")
            bytes.add(body.count, ordering: .relaxed)
        }
    }
}

/// Apple's call as the HTTP client sees it.
let appleRequest = HTTPRequest(
    method: .post, url: "https://api.storekit.itunes.apple.com/inApps/v1/transactions/2000000000000001")

/// One job's spans, as the worker makes them: the runtime's `process` span current while its handler runs (when
/// recorded), Apple's call with its HTTP exchange beneath, the ledger's two round trips each with its batch beneath,
/// the `send` of its event.
func job(_ tracer: Tracer, _ index: Int) async {
    let process = tracer.start(
        "process jobs", kind: .consumer, parent: nil,
        attributes: [
            ("messaging.system", .string("kafka")), ("messaging.destination.name", .string("jobs")),
            ("messaging.kafka.destination.partition", .int(3)), ("messaging.kafka.offset", .int(Int64(index))),
        ])
    let handle = {
        await process.inChild("apple verify", kind: .client) {
            guard let current = Span.current, current.context.sampled else { return }
            let exchange = current.child("POST", kind: .client, attributes: appleRequest.spanAttributes)
            exchange.set("http.response.status_code", .int(200))
            exchange.end()
        }
        for operation in ["ledger_lookup", "ledger_record"] {
            await process.inChild(
                operation, kind: .client, attributes: [("receipt_worker.operation", .string(operation))]
            ) {
                await Span.inCurrentChild("ledger batch", kind: .internal) {
                    Span.current?.set("receipt_worker.ledger.batch_size", .int(64))
                }
            }
        }
        let send = process.child(
            "send results", kind: .producer, attributes: [("messaging.destination.name", .string("results"))])
        _ = send.context.traceparent  // the header the event carries
        send.end()
        process.set("receipt_worker.outcome", .string("published"))
    }
    if process.context.sampled {
        await Span.$current.withValue(process) { await handle() }
    } else {
        await handle()
    }
    process.end()
}

func measure(sampleRatio: Double) async -> (perJob: Double, bytesPerSpan: Double) {
    let queue = Queue()
    let tracer = Tracer(sampleRatio: sampleRatio) { queue.add($0) }
    for index in 0..<1_000 { await job(tracer, index) }  // warm
    let before = cpuMicroseconds()
    let bytesBefore = queue.bytes.load(ordering: .relaxed)
    for index in 0..<jobs { await job(tracer, index) }
    let spent = cpuMicroseconds() - before
    let bytes = Double(queue.bytes.load(ordering: .relaxed) - bytesBefore)
    return (spent / Double(jobs), bytes / Double(jobs * spansPerJob))
}

let off = await measure(sampleRatio: 0)
let on = await measure(sampleRatio: 1)
print(
    String(
        format:
            "span-bench: %d jobs; tracing's CPU a job: sampled %.2f us (%d spans made, ended, queued, encoded: %.2f us a span), unsampled %.2f us (ids drawn, nothing recorded); %.0f bytes of OTLP a span",
        jobs, on.perJob, spansPerJob, on.perJob / Double(spansPerJob), off.perJob, on.bytesPerSpan))
