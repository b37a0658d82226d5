import Synchronization
import Testing

@testable import TGEventLoop

@Suite struct EventLoopTests {
    /// Deadlines are counted in whole nanoseconds, truncated toward zero, for any duration a
    /// configuration can give (hours included) and for negative ones; beyond 64 bits, clamped.
    @Test func durationsBecomeWholeNanoseconds() {
        let cases: [(Duration, Int64)] = [
            (.zero, 0), (.nanoseconds(1), 1), (.microseconds(1), 1_000), (.milliseconds(50), 50_000_000),
            (.seconds(10), 10_000_000_000), (.seconds(86_400 * 365), 31_536_000_000_000_000), (.seconds(-2), -2_000_000_000),
            (.milliseconds(-1500), -1_500_000_000), (Duration(secondsComponent: 0, attosecondsComponent: 999_999_999), 0),
            (Duration(secondsComponent: 1, attosecondsComponent: 1_999_999_999), 1_000_000_001),
            (Duration(secondsComponent: -1, attosecondsComponent: -1_999_999_999), -1_000_000_001),
            // Either side of 2^72 attoseconds (about 78 minutes), where the cheap division ends.
            (.seconds(4722), 4_722_000_000_000), (.seconds(4723), 4_723_000_000_000), (.seconds(-4723), -4_723_000_000_000),
            (Duration(secondsComponent: 4722, attosecondsComponent: 366_482_869_645_213_695), 4_722_366_482_869),
            (Duration(secondsComponent: 4722, attosecondsComponent: 366_482_869_645_213_696), 4_722_366_482_869),
            // Past what 64 bits of nanoseconds hold: the largest count, never a wrapped one.
            (.seconds(Int64.max), Int64.max), (.seconds(Int64.min), Int64.min),
        ]
        for (duration, nanoseconds) in cases { #expect(EventLoop.nanoseconds(duration) == nanoseconds, "\(duration)") }
    }

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

    /// The heap holds its timers without reference counting and gives them back itself: a loop
    /// that stops with timers still pending lets go of them (and of what their actions hold).
    @Test func aStoppedLoopLetsGoOfTimersThatNeverFired() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        weak var held: Fired?
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let payload = Fired()
            held = payload
            loop.execute {
                let now = EventLoop.now()
                for offset in 1...3 {
                    loop.schedule(at: now + Int64(offset) * 60_000_000_000) { payload.order.withLock { $0.append(offset) } }
                }
                done.resume()
            }
        }
        #expect(held != nil)
        loop.stop()
        #expect(held == nil)
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

    /// Every proxied call arms a long deadline and cancels it a millisecond later: a cancelled
    /// timer must leave the heap at once (it used to stay until its deadline, so the heap held
    /// every call of the last minute), and the rest must still fire in order.
    @Test func aCancelledTimerLeavesTheHeapAtOnceAndTheOthersStillFireInOrder() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let fired = Fired()
        let left = await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            loop.execute {
                let now = EventLoop.now()
                var generator = SystemRandomNumberGenerator()
                var timers: [(Int, EventLoopTimer)] = []
                for value in 0..<2000 {
                    let offset = Int64.random(in: 1...5_000, using: &generator) * 1_000
                    timers.append((value, loop.schedule(at: now + 10_000_000 + offset) { fired.order.withLock { $0.append(value) } }))
                }
                timers.shuffle(using: &generator)
                // Cancel all but 20, in random order; the heap keeps only those 20.
                for (_, timer) in timers.dropFirst(20) { timer.cancel() }
                let kept = loop.pendingTimers
                loop.schedule(at: now + 60_000_000) { done.resume(returning: kept) }
            }
        }
        #expect(left == 20)
        let order = fired.order.withLock { $0 }
        #expect(order.count == 20)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                #expect(loop.pendingTimers == 0)
                done.resume()
            }
        }
        loop.stop()
    }
}

extension EventLoopTests {
    /// libcurl moves its deadline all the time: one reusable timer follows it, fires once per
    /// schedule, keeps its action, and holds one place in the heap however often it moves.
    @Test func aReusableTimerMovesInPlaceAndFiresOncePerSchedule() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let fired = Fired()
        let counts = await withCheckedContinuation { (done: CheckedContinuation<[Int], Never>) in
            loop.execute {
                let now = EventLoop.now()
                let timer = loop.makeTimer { fired.order.withLock { $0.append(1) } }
                var counts = [loop.pendingTimers]
                for step in 0..<100 { timer.schedule(at: now + 500_000_000 - Int64(step) * 1_000_000) }
                counts.append(loop.pendingTimers)
                timer.schedule(at: now + 5_000_000)
                loop.schedule(at: now + 30_000_000) {
                    counts.append(fired.order.withLock { $0.count })
                    // Fired: out of the heap, action kept; again, then unscheduled before it is due.
                    counts.append(loop.pendingTimers)
                    timer.schedule(at: EventLoop.now() + 5_000_000)
                    loop.schedule(at: EventLoop.now() + 30_000_000) {
                        counts.append(fired.order.withLock { $0.count })
                        timer.schedule(at: EventLoop.now() + 5_000_000)
                        timer.unschedule()
                        loop.schedule(at: EventLoop.now() + 30_000_000) {
                            counts.append(fired.order.withLock { $0.count })
                            counts.append(loop.pendingTimers)
                            done.resume(returning: counts)
                        }
                    }
                }
            }
        }
        #expect(counts == [0, 1, 1, 0, 2, 2, 0])
        loop.stop()
    }

    /// Reusable timers moved in place, earlier and later, among many others: they still fire in
    /// the order of their last deadlines.
    @Test func timersMovedInPlaceStillFireInDeadlineOrder() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let fired = Fired()
        let expected = await withCheckedContinuation { (done: CheckedContinuation<[Int], Never>) in
            loop.execute {
                let now = EventLoop.now()
                var generator = SystemRandomNumberGenerator()
                var deadlines: [Int: Int64] = [:]
                var timers: [EventLoopTimer] = []
                for value in 0..<300 {
                    timers.append(loop.makeTimer { fired.order.withLock { $0.append(value) } })
                }
                for _ in 0..<5 {
                    for (value, timer) in timers.enumerated() {
                        let deadline = now + 10_000_000 + Int64.random(in: 0...5_000, using: &generator) * 1_000 + Int64(value)
                        deadlines[value] = deadline
                        timer.schedule(at: deadline)
                    }
                }
                #expect(loop.pendingTimers == 300)
                let order = deadlines.sorted { $0.value < $1.value }.map(\.key)
                loop.schedule(at: now + 40_000_000) {
                    _ = timers
                    done.resume(returning: order)
                }
            }
        }
        #expect(fired.order.withLock { $0 } == expected)
        loop.stop()
    }

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

extension EventLoopTests {
    /// A hook that runs later in a round can make work ready for one that ran earlier (libcurl's
    /// "act now" while libmicrohttpd's run starts a call): with `wakeSoon` the loop goes round
    /// again at once instead of sleeping until an unrelated event (here: a timer 2 s away).
    @Test func workALaterHookMakesReadyForAnEarlierOneIsDoneWithoutSleeping() async {
        let loop = EventLoopGroup(count: 1).loops[0]
        let early = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            loop.execute {
                var due = false
                var made = false
                var armed = false
                var answered = false
                let answer = { (value: Bool) in
                    guard !answered else { return }
                    answered = true
                    done.resume(returning: value)
                }
                loop.addPreWaitHook {
                    if due {
                        due = false
                        answer(true)
                    }
                    return nil
                }
                loop.addPreWaitHook {
                    if armed, !made {
                        made = true
                        due = true
                        loop.wakeSoon()
                    }
                    return nil
                }
                // Armed from a timer, so the round that makes the work ready has no other reason to
                // come back soon (the inbox's wake-up is long consumed).
                loop.schedule(at: EventLoop.now() + 20_000_000) { armed = true }
                loop.schedule(at: EventLoop.now() + 2_000_000_000) { answer(false) }
            }
        }
        #expect(early)
        loop.stop()
    }
}

final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

final class Fired: Sendable {
    let order = Mutex<[Int]>([])
}
