/* Test-only kill and pause points: with NICPICK_TEST_HOOKS compiled in (the normal
 * `make` build; never `make static`, the release build), a process whose
 * NICPICK_TEST_KILL_AT names a step is killed with SIGKILL when it reaches
 * that step, as a node losing the container would.  The restart tests
 * (tests/integration/test_restart.py) use it to check that a re-run reaches
 * the same decision and leaves no partial files.  Steps: before-report,
 * after-report, after-parts (a gatherer: every other pod holds its part of
 * the round, the round is not on its own pod yet), after-decision,
 * after-probe (its listeners still open), then the output set's
 * (lib/outputs/write.c): mid-outputs (the new set half written),
 * outputs-written, outputs-linked, outputs-swapped (the new set in force,
 * the old one not yet removed); mid-smoke-info, mid-smoke.
 * NICPICK_TEST_PAUSE_AT=step:ms instead makes the process stay ms
 * milliseconds at that step: the hostile-port tests
 * (tests/integration/test_probe_hostile.py) keep each pod's listeners
 * open long enough that their attack surely reaches every one. */
#ifndef NP_TESTHOOK_H
#define NP_TESTHOOK_H

#ifdef NICPICK_TEST_HOOKS
void np_test_point(const char *step);
#else
static inline void np_test_point(const char *step)
{
	(void)step;
}
#endif

#endif
