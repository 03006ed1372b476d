/** A clock the test moves by hand, so expiry boundaries are exact. */
export function manualClock(start = new Date('2026-11-22T10:00:00.000Z')) {
  let now = start.getTime();
  const clock = () => new Date(now);
  clock.advance = (ms: number) => {
    now += ms;
  };
  clock.set = (date: Date) => {
    now = date.getTime();
  };
  return clock;
}
