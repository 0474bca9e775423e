-- The client addresses (an IPv4 address, an IPv6 /64) each user name signed in from lately
-- (src/auth/throttle.ts). Sign-in guessing has a ceiling per user name across every address; attempts from
-- a client listed here for that name do not count towards it and are not refused by it, so that guessing
-- an account from many addresses cannot lock its user out of the addresses they use. A row is written by
-- each successful sign-in and purged KNOWN_CLIENT_DAYS after the last one.
CREATE TABLE auth_known_clients (
  user_name     text NOT NULL,
  client        text NOT NULL,
  succeeded_at  timestamptz NOT NULL,
  PRIMARY KEY (user_name, client)
);
CREATE INDEX auth_known_clients_succeeded ON auth_known_clients (succeeded_at);
