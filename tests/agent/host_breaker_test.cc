// The breaker state the ranks of one host share (agent/transport/host_breaker.h), between real
// processes: a trip counts for the others while its process lives and until a rank sees the
// server move; never for the process itself, nor for another server. The 4-rank training
// against a frozen server is tests/e2e/test_rank_breaker.py.
#include "agent/transport/host_breaker.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

// A child process holding its own HostBreaker for `server`, doing what the parent writes to it
// one byte at a time ('t': trip, 'm': saw the server move, 'q': quit), answering each with a byte.
class Rank {
 public:
  explicit Rank(const std::string& server) {
    int to[2];
    int from[2];
    EXPECT_EQ(::pipe(to), 0);
    EXPECT_EQ(::pipe(from), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to[1]);
      ::close(from[0]);
      std::unique_ptr<HostBreaker> b = HostBreaker::Open(server);
      char c = 0;
      while (::read(to[0], &c, 1) == 1 && c != 'q') {
        if (b != nullptr) b->SetTripped(c == 't');
        if (::write(from[1], &c, 1) != 1) break;
      }
      ::_exit(b != nullptr ? 0 : 3);
    }
    ::close(to[0]);
    ::close(from[1]);
    to_ = to[1];
    from_ = from[0];
  }
  ~Rank() { Quit(); }
  void Do(char c) {
    ASSERT_EQ(::write(to_, &c, 1), 1);
    char echo = 0;
    ASSERT_EQ(::read(from_, &echo, 1), 1);
  }
  int Quit() {
    if (pid_ <= 0) return -1;
    const char q = 'q';
    (void)!::write(to_, &q, 1);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    ::close(to_);
    ::close(from_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
};

std::string TestServer(const char* tag) {
  return std::string("ipv4:127.0.0.1:") + tag + "-" + std::to_string(::getpid());
}

TEST(HostBreakerTest, ATripCountsForTheOtherRanksUntilTheServerMovesOrItsRankDies) {
  const std::string server = TestServer("moves");
  std::unique_ptr<HostBreaker> me = HostBreaker::Open(server);
  ASSERT_NE(me, nullptr) << "no POSIX shared memory here";
  EXPECT_FALSE(me->OtherTripped());
  me->SetTripped(true);
  EXPECT_FALSE(me->OtherTripped()) << "a process's own trip is its own breaker's business";
  me->SetTripped(false);

  Rank other(server);
  other.Do('t');
  EXPECT_TRUE(me->OtherTripped());
  // Another server's ranks share nothing with this one's.
  std::unique_ptr<HostBreaker> elsewhere = HostBreaker::Open(TestServer("elsewhere"));
  ASSERT_NE(elsewhere, nullptr);
  EXPECT_FALSE(elsewhere->OtherTripped());
  // This rank saw the server move: the other's trip, made before, no longer holds anyone back.
  me->SetTripped(false);
  EXPECT_FALSE(me->OtherTripped());
  other.Do('t');  // a new congestion
  EXPECT_TRUE(me->OtherTripped());
  other.Do('m');  // the tripped rank itself saw the server move
  EXPECT_FALSE(me->OtherTripped());
  other.Do('t');
  EXPECT_TRUE(me->OtherTripped());
  EXPECT_EQ(other.Quit(), 0);  // its breaker clears its slot
  EXPECT_FALSE(me->OtherTripped());
  ::shm_unlink(me->name().c_str());
  ::shm_unlink(elsewhere->name().c_str());
}

TEST(HostBreakerTest, ARankThatDiedTrippedHoldsNoOneBack) {
  const std::string server = TestServer("died");
  std::unique_ptr<HostBreaker> me = HostBreaker::Open(server);
  ASSERT_NE(me, nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::unique_ptr<HostBreaker> b = HostBreaker::Open(server);
    if (b != nullptr) b->SetTripped(true);
    ::_exit(0);  // no destructor: as a SIGKILLed rank leaves its slot
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(me->OtherTripped());
  // Its slot is taken again by the next process that trips; a live one's trip still counts.
  Rank next(server);
  next.Do('t');
  EXPECT_TRUE(me->OtherTripped());
  ::shm_unlink(me->name().c_str());
}

}  // namespace
}  // namespace parity::agent
