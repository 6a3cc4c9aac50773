// The agent's own threads run below the training's (parity.background_nice): when the cores are
// busy, the scheduler runs the training first and the agent's sending waits, instead of the
// training being preempted for it.
#pragma once

namespace parity::agent {

// Raises the calling thread's nice value by `nice` (at most to 19), once per thread: later calls
// on the same thread do nothing. Linux keeps a nice value per thread; elsewhere, and for 0,
// nothing changes. Never fails the caller (a refusal is ignored).
void LowerThisThreadOnce(int nice);

// This thread's nice value (Linux; 0 elsewhere).
int ThisThreadNice();

}  // namespace parity::agent
