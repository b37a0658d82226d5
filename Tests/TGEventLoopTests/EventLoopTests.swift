import Synchronization
import TGEventLoop
import Testing

@Suite struct EventLoopTests {
    @Test func runsWorkPostedFromOtherThreadsOnItsOwnThreadAndStops() async {
        let group = EventLoopGroup(count: 2)
        for loop in group.loops {
            let onLoop = await loop.run { loop.inEventLoop }
            #expect(onLoop)
            #expect(!loop.inEventLoop)
        }
        let counter = Counter()
        await withTaskGroup(of: Void.self) { tasks in
            for index in 0..<200 {
                let loop = group.loops[index % 2]
                tasks.addTask {
                    await loop.run { () -> Void in _ = counter.value.add(1, ordering: .relaxed) }
                }
            }
        }
        #expect(counter.value.load(ordering: .relaxed) == 200)
        group.stop()
    }

    @Test func firesTimersInDeadlineOrderAndSkipsCancelledOnes() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let fired = Fired()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                let now = EventLoop.now()
                loop.schedule(at: now + 30_000_000) { fired.order.withLock { $0.append(3) } }
                loop.schedule(at: now + 10_000_000) { fired.order.withLock { $0.append(1) } }
                let cancelled = loop.schedule(at: now + 20_000_000) { fired.order.withLock { $0.append(2) } }
                cancelled.cancel()
                loop.schedule(at: now + 40_000_000) { done.resume() }
            }
        }
        #expect(fired.order.withLock { $0 } == [1, 3])
        loop.stop()
    }
}

extension EventLoopTests {
    /// libcurl schedules its timeout from inside work the loop does before sleeping; the loop must
    /// wake for it rather than sleep until some unrelated event.
    @Test func aTimerScheduledByAPreWaitHookWakesTheLoopOnTime() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let clock = ContinuousClock()
        let started = clock.now
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                var armed = false
                loop.addPreWaitHook {
                    if !armed {
                        armed = true
                        loop.schedule(at: EventLoop.now() + 50_000_000) { done.resume() }
                    }
                    return nil
                }
            }
        }
        #expect(clock.now - started < .seconds(2))
        loop.stop()
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

final class Fired: Sendable {
    let order = Mutex<[Int]>([])
}
