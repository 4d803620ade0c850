// The session's state machine and the collector's mailbox (core/session_state.h),
// on their own: the table, the first-wins races, and requests posted from
// many threads and from signal handlers while the taker drains them.
#include "core/session_state.h"

#include "core/run_id.h"
#include "core/shared_arena.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace dlprof {
namespace {

const Phase kPhases[] = {Phase::kOff,          Phase::kBaseline, Phase::kSampling,
                         Phase::kSteppedAside, Phase::kEnding,   Phase::kEnded};
const PhaseEvent kEvents[] = {
    PhaseEvent::kStart,      PhaseEvent::kStartBaseline, PhaseEvent::kStartSteppedAside,
    PhaseEvent::kBaselineDone, PhaseEvent::kStepAside,   PhaseEvent::kEnd,
    PhaseEvent::kEndWritten, PhaseEvent::kOutputFailed,  PhaseEvent::kLost};

// The whole table, written out independently of the switch in session_state.cc:
// every (phase, event) pair not listed must be refused.
std::map<std::pair<Phase, PhaseEvent>, Phase> ExpectedTable() {
  using P = Phase;
  using E = PhaseEvent;
  std::map<std::pair<P, E>, P> t;
  t[{P::kOff, E::kStart}] = P::kSampling;
  t[{P::kOff, E::kStartBaseline}] = P::kBaseline;
  t[{P::kOff, E::kStartSteppedAside}] = P::kSteppedAside;
  t[{P::kBaseline, E::kBaselineDone}] = P::kSampling;
  for (P recording : {P::kBaseline, P::kSampling, P::kSteppedAside}) {
    t[{recording, E::kEnd}] = P::kEnding;
    t[{recording, E::kOutputFailed}] = P::kEnded;
    t[{recording, E::kLost}] = P::kOff;
  }
  t[{P::kBaseline, E::kStepAside}] = P::kSteppedAside;
  t[{P::kSampling, E::kStepAside}] = P::kSteppedAside;
  t[{P::kEnding, E::kEndWritten}] = P::kEnded;
  t[{P::kEnding, E::kOutputFailed}] = P::kEnded;
  return t;
}

TEST(SessionPhases, EveryPairOfPhaseAndEventFollowsTheTable) {
  const auto expected = ExpectedTable();
  int moves = 0;
  for (Phase from : kPhases) {
    for (PhaseEvent event : kEvents) {
      Phase to = Phase::kOff;
      const bool moved = NextPhase(from, event, &to);
      auto it = expected.find({from, event});
      if (it == expected.end()) {
        EXPECT_FALSE(moved) << PhaseName(from) << " moved by event " << static_cast<int>(event)
                            << " to " << PhaseName(to);
      } else {
        ++moves;
        EXPECT_TRUE(moved) << PhaseName(from) << " refused event " << static_cast<int>(event);
        EXPECT_EQ(to, it->second) << PhaseName(from) << " + event " << static_cast<int>(event);
      }
    }
  }
  EXPECT_EQ(moves, static_cast<int>(expected.size()));
}

TEST(SessionPhases, NothingLeavesTheEndedPhaseAndOnlyAStartLeavesOff) {
  for (PhaseEvent event : kEvents) {
    Phase to;
    EXPECT_FALSE(NextPhase(Phase::kEnded, event, &to)) << static_cast<int>(event);
    const bool start = event == PhaseEvent::kStart || event == PhaseEvent::kStartBaseline ||
                       event == PhaseEvent::kStartSteppedAside;
    EXPECT_EQ(NextPhase(Phase::kOff, event, &to), start) << static_cast<int>(event);
  }
}

TEST(SessionState, ALifeFromBaselineToEnded) {
  SessionState s;
  EXPECT_EQ(s.phase(), Phase::kOff);
  EXPECT_FALSE(s.recording());
  EXPECT_FALSE(s.BeginEnd(kEndExit)) << "nothing to end before the start";
  ASSERT_TRUE(s.Apply(PhaseEvent::kStartBaseline));
  EXPECT_TRUE(s.recording());
  EXPECT_FALSE(s.Apply(PhaseEvent::kStart)) << "a session starts once";
  ASSERT_TRUE(s.Apply(PhaseEvent::kBaselineDone));
  EXPECT_EQ(s.phase(), Phase::kSampling);
  EXPECT_FALSE(s.Apply(PhaseEvent::kBaselineDone));
  ASSERT_TRUE(s.BeginEnd(kEndQuickExit, 0x1ff));
  EXPECT_EQ(s.phase(), Phase::kEnding);
  EXPECT_FALSE(s.recording());
  EXPECT_EQ(s.end_cause(), kEndQuickExit);
  EXPECT_EQ(s.end_status(), 0xff) << "an exit status is 8 bits";
  EXPECT_FALSE(s.BeginEnd(SIGTERM)) << "the first end wins";
  EXPECT_EQ(s.end_cause(), kEndQuickExit);
  ASSERT_TRUE(s.Apply(PhaseEvent::kEndWritten));
  EXPECT_EQ(s.phase(), Phase::kEnded);
}

TEST(SessionState, TheFirstReasonToStepAsideWinsAndKeepsItsTime) {
  SessionState s;
  ASSERT_TRUE(s.Apply(PhaseEvent::kStart));
  EXPECT_TRUE(s.StepAside(kProgramSigprof, 111));
  EXPECT_EQ(s.phase(), Phase::kSteppedAside);
  EXPECT_FALSE(s.StepAside(kSeccompFilter, 222));
  EXPECT_EQ(s.off_reason(), kProgramSigprof);
  EXPECT_EQ(s.off_ns(), 111);
  EXPECT_TRUE(s.recording()) << "stepped aside still records stages and wall time";
  EXPECT_TRUE(s.BeginEnd(SIGINT));
  EXPECT_EQ(s.end_cause(), SIGINT);
}

TEST(SessionState, AReasonBeforeTheStartIsKeptAndTheSessionStartsAside) {
  SessionState s;
  EXPECT_TRUE(s.StepAside(kSigprofBeforeStart, 5));
  EXPECT_EQ(s.phase(), Phase::kOff) << "no phase change before the start";
  ASSERT_TRUE(s.Apply(PhaseEvent::kStartSteppedAside));
  EXPECT_EQ(s.off_reason(), kSigprofBeforeStart);
  EXPECT_FALSE(s.Apply(PhaseEvent::kBaselineDone));
}

// Three ends (a signal, _exit, exit) and a step-aside race: exactly one end
// wins and its cause is the one kept; the step-aside keeps its reason.
TEST(SessionState, ManyThreadsRacingToEndOneWins) {
  for (int round = 0; round < 300; ++round) {
    SessionState s;
    ASSERT_TRUE(s.Apply(PhaseEvent::kStart));
    std::atomic<int> winners{0}, winner_cause{0};
    std::atomic<bool> go{false};
    const int causes[] = {SIGTERM, kEndQuickExit, kEndExit};
    std::vector<std::thread> threads;
    for (int cause : causes) {
      threads.emplace_back([&, cause] {
        while (!go.load()) {
        }
        if (s.BeginEnd(cause)) {
          winners.fetch_add(1);
          winner_cause.store(cause);
        }
      });
    }
    threads.emplace_back([&] {
      while (!go.load()) {
      }
      s.StepAside(kProgramSigprof, 1);
    });
    go.store(true);
    for (auto& t : threads) t.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    EXPECT_EQ(s.phase(), Phase::kEnding);
    EXPECT_EQ(s.end_cause(), winner_cause.load());
    EXPECT_EQ(s.off_reason(), kProgramSigprof);
  }
}

// A fork child that cannot restart (Lost) and an end race: one of them moves.
TEST(SessionState, LosingTheSessionAndEndingItExcludeEachOther) {
  int lost = 0, ended = 0;
  for (int round = 0; round < 300; ++round) {
    SessionState s;
    ASSERT_TRUE(s.Apply(PhaseEvent::kStartBaseline));
    std::atomic<bool> go{false};
    bool by_end = false, by_loss = false;
    std::thread a([&] {
      while (!go.load()) {
      }
      by_end = s.BeginEnd(SIGINT);
    });
    std::thread b([&] {
      while (!go.load()) {
      }
      by_loss = s.Apply(PhaseEvent::kLost);
    });
    go.store(true);
    a.join();
    b.join();
    if (by_end && by_loss) {
      // The end came first; a loss from Ending is refused by the table.
      ADD_FAILURE() << "both moved in round " << round;
    }
    ASSERT_TRUE(by_end || by_loss) << "round " << round;
    EXPECT_EQ(s.phase(), by_end ? Phase::kEnding : Phase::kOff);
    (by_end ? ended : lost) += 1;
  }
  std::printf("[ state ] 300 races: %d ended first, %d lost first\n", ended, lost);
}

TEST(Mailbox, RequestsPostedFromManyThreadsAreAllTakenOnce) {
  Mailbox box;
  constexpr int kThreads = 4, kPosts = 20000;
  std::atomic<int> posted[5] = {};
  std::atomic<bool> done{false};
  long taken[5] = {};
  std::thread taker([&] {
    for (;;) {
      const bool last = done.load();
      const uint32_t bits = box.Take();
      for (int b = 0; b < 5; ++b) taken[b] += (bits >> b) & 1;
      if (last && bits == 0) break;
      box.Sleep(0, box.WakeCount());  // a deadline in the past: returns at once
    }
  });
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPosts; ++i) {
        const int b = (i + t) % 5;
        posted[b].fetch_add(1);
        box.Post(1u << b);
      }
    });
  }
  for (auto& p : posters) p.join();
  done.store(true);
  taker.join();
  for (int b = 0; b < 5; ++b) {
    // Posts of the same bit between two takes merge; every bit posted is
    // taken at least once after its last post, and never more often than posted.
    EXPECT_GE(taken[b], 1) << "bit " << b;
    EXPECT_LE(taken[b], posted[b].load()) << "bit " << b;
  }
  EXPECT_EQ(box.Pending(), 0u);
}

TEST(Mailbox, APostWakesASleeperBeforeItsDeadline) {
  Mailbox box;
  const uint32_t seen = box.WakeCount();
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const int64_t start_ns = start.tv_sec * 1000000000LL + start.tv_nsec;
  std::thread poster([&] {
    usleep(20000);
    box.Post(kRequestRearm);
  });
  const bool woken = box.Sleep(start_ns + 30LL * 1000000000, seen);
  timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  poster.join();
  EXPECT_TRUE(woken);
  EXPECT_LT(end.tv_sec * 1000000000LL + end.tv_nsec - start_ns, 10LL * 1000000000)
      << "the sleeper waited for its deadline, not for the post";
  EXPECT_EQ(box.Take(), static_cast<uint32_t>(kRequestRearm));
}

TEST(Mailbox, WithdrawnRequestsAreNotTakenAndOthersStay) {
  Mailbox box;
  box.Post(kRequestPause | kRequestExecEnd);
  box.Withdraw(kRequestPause);
  EXPECT_EQ(box.Take(), static_cast<uint32_t>(kRequestExecEnd));
  int id = 0;
  EXPECT_FALSE(box.TakeWorker(&id));
  box.PostWorker(7);
  box.PostWorker(9);
  EXPECT_EQ(box.Take(), static_cast<uint32_t>(kRequestWorker));
  ASSERT_TRUE(box.TakeWorker(&id));
  EXPECT_EQ(id, 9) << "the last dlprof_set_worker wins";
  EXPECT_FALSE(box.TakeWorker(&id));
  box.Post(kRequestDisarm);
  box.PostWorker(3);
  box.ResetInForkChild();
  EXPECT_EQ(box.Take(), 0u) << "a fork child does not serve its parent's requests";
  EXPECT_FALSE(box.TakeWorker(&id));
}

TEST(Mailbox, AFlushIsDoneOnlyOnceItsTicketIsPublished) {
  Mailbox box;
  std::atomic<bool> answerer{true};
  const uint64_t first = box.NewFlushTicket();
  const uint64_t second = box.NewFlushTicket();
  EXPECT_EQ(second, first + 1);
  EXPECT_FALSE(box.AwaitFlush(first, 20, answerer)) << "nobody published: times out";
  std::thread collector([&] {
    usleep(10000);
    box.PublishFlushDone(first);
  });
  EXPECT_TRUE(box.AwaitFlush(first, 10000, answerer));
  collector.join();
  EXPECT_FALSE(box.AwaitFlush(second, 20, answerer));
  // The answerer gone: the waiter is let go at once, not at its timeout.
  std::thread leaving([&] {
    usleep(10000);
    answerer.store(false);
    box.WakeFlushWaiters();
  });
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  EXPECT_FALSE(box.AwaitFlush(second, 30000, answerer));
  clock_gettime(CLOCK_MONOTONIC, &b);
  leaving.join();
  EXPECT_LT(b.tv_sec - a.tv_sec, 10) << "waited for the timeout after the answerer left";
}

// Posts from a signal handler that interrupts the taker's own thread (the
// program's handler calling into dlprof): nothing locks, nothing is lost.
Mailbox g_box;
std::atomic<int> g_handler_posts{0};
void PostFromHandler(int) {
  g_box.Post(kRequestDisarm);
  g_handler_posts.fetch_add(1);
}

TEST(Mailbox, PostingFromASignalHandlerOnTheTakersThreadNeverBlocks) {
  struct sigaction sa {};
  sa.sa_handler = PostFromHandler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  const pthread_t self = pthread_self();
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load()) {
      pthread_kill(self, SIGUSR1);
      usleep(50);
    }
  });
  long takes_with_disarm = 0;
  const time_t give_up = time(nullptr) + 20;
  while (g_handler_posts.load() < 500 && time(nullptr) < give_up) {
    if (g_box.Take() & kRequestDisarm) ++takes_with_disarm;
  }
  stop.store(true);
  sender.join();
  signal(SIGUSR1, SIG_DFL);
  takes_with_disarm += (g_box.Take() & kRequestDisarm) ? 1 : 0;
  EXPECT_GT(g_handler_posts.load(), 0);
  EXPECT_GE(takes_with_disarm, 1);
  EXPECT_LE(takes_with_disarm, g_handler_posts.load());
}

// At session start both move their words into the shared arena: what they
// held comes along, and from then on the arena's words are the ones used
// (a fork child's copy of them is then its own, tests/shared_arena_test.cc).
TEST(SessionState, MovedIntoTheArenaKeepsItsWordsAndUsesThem) {
  SessionState state;
  ASSERT_TRUE(state.StepAside(kSigprofBeforeStart, 42));
  auto* words = static_cast<SessionState::Data*>(ArenaMap(sizeof(SessionState::Data), AtFork::kCopy));
  ASSERT_NE(words, nullptr);
  state.MoveTo(words);
  EXPECT_EQ(words->off_reason.load(), kSigprofBeforeStart);
  EXPECT_EQ(state.off_ns(), 42);
  EXPECT_TRUE(state.Apply(PhaseEvent::kStartSteppedAside));
  EXPECT_EQ(words->phase.load(), static_cast<int>(Phase::kSteppedAside)) << "not the arena's words";
  EXPECT_TRUE(state.BeginEnd(kEndExit));
  EXPECT_EQ(words->end_cause.load(), kEndExit);
}

TEST(Mailbox, MovedIntoTheArenaKeepsItsRequestsAndWakesItsSleeper) {
  Mailbox box;
  box.Post(kRequestRearm);
  box.PostWorker(7);
  auto* words = static_cast<Mailbox::Data*>(ArenaMap(sizeof(Mailbox::Data), AtFork::kCopy));
  ASSERT_NE(words, nullptr);
  box.MoveTo(words);
  EXPECT_EQ(words->bits.load(), kRequestRearm | kRequestWorker);
  int worker = 0;
  EXPECT_TRUE(box.TakeWorker(&worker));
  EXPECT_EQ(worker, 7);
  EXPECT_EQ(box.Take(), kRequestRearm | kRequestWorker);
  const uint32_t seen = box.WakeCount();
  std::thread poster([&] {
    usleep(20000);
    box.Post(kRequestDisarm);
  });
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  const int64_t start_ns = start.tv_sec * 1000000000LL + start.tv_nsec;
  // (Woken, not timed out: the deadline is 30 s away, and the test's own
  // timeout is shorter.)
  EXPECT_TRUE(box.Sleep(start_ns + 30LL * 1000000000, seen)) << "the post did not wake it";
  poster.join();
  EXPECT_EQ(words->bits.load(), kRequestDisarm);
}

// Two runs of the same pid in the same second (two containers whose
// programs are PID 1, one DLPROF_OUT): two folders.
TEST(RunId, OnePidInOneSecondGetsDistinctIds) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(NewRunId(1));
  EXPECT_EQ(ids.size(), 1000u);
  const std::string id = *ids.begin();
  EXPECT_EQ(id.find('/'), std::string::npos);
  EXPECT_LT(id.size(), 128u) << id;  // what the runtime accepts from DLPROF_RUN_ID
  EXPECT_NE(id.find("-1-"), std::string::npos) << id;
}

}  // namespace
}  // namespace dlprof
