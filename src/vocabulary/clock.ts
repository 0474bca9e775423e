/** The time now; the system clock unless a test moves it. Every layer takes a `Clock` instead of calling `new Date()`. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

/** The time now by `clock`, or by the system clock when none is given. */
export const now = (clock: Clock | undefined): Date => (clock ?? systemClock)();
