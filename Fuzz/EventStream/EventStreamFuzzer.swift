// libFuzzer harness: bytes of a `text/event-stream` as a server might send them. The first
// byte seeds how the rest is split into chunks. Checks that the parser never crashes, that
// any split of the same bytes gives the events a byte-at-a-time parse gives (a prefix of them
// when the limit is hit, since the chunk that passes it is refused whole), that it fails at
// the same point of the stream either way, and that no event it dispatches exceeds the limit.
import Foundation
@testable import Trellis

private let limit = 512

/// Every event and whether the limit was hit, feeding `bytes` in chunks of `sizes` (cycled).
private func parse(_ bytes: ArraySlice<UInt8>, sizes: [Int]) -> (events: [ServerSentEvent], failed: Bool, lastEventID: String?) {
    var parser = EventStreamParser(maximumEventSize: limit)
    var events: [ServerSentEvent] = []
    var start = bytes.startIndex
    var turn = 0
    while start < bytes.endIndex {
        let end = min(start + sizes[turn % sizes.count], bytes.endIndex)
        turn += 1
        do {
            events += try parser.parse(bytes[start..<end])
        } catch {
            return (events, true, parser.lastEventID)
        }
        start = end
    }
    return (events, false, parser.lastEventID)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventStream(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let seed = input.first else { return 0 }
    let bytes = input.dropFirst()
    let sizes = [1 + Int(seed % 7), 1 + Int(seed / 7 % 13), 1 + Int(seed / 91) * 17]

    let reference = parse(bytes, sizes: [1])
    let chunked = parse(bytes, sizes: sizes)
    check(reference.failed == chunked.failed, "the limit was hit \(reference.failed ? "byte by byte only" : "in chunks only")")
    if reference.failed {
        check(reference.events.starts(with: chunked.events), "chunked events \(chunked.events) are no prefix of \(reference.events)")
    } else {
        check(reference.events == chunked.events, "chunks \(sizes) gave \(chunked.events), bytes gave \(reference.events)")
        check(reference.lastEventID == chunked.lastEventID, "the last event ID differs between splits")
    }
    for event in reference.events {
        check(event.data.utf8.count + event.type.utf8.count <= limit, "an event of \(event.data.utf8.count) bytes passed the limit of \(limit)")
    }
    return 0
}

@_cdecl("fuzz_event_stream_main")
public func fuzzerMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    runFuzzer(argc, argv) { data, size in fuzzEventStream(data.map(UnsafeRawPointer.init), size) }
}
