/**
 * 0007 — the day's spend of each org under a daily budget (rails/OrgBudget.ts).
 *
 * - `org_spend`: one row per org and UTC day: what settled calls cost (`spent_micros`) and what the calls in flight
 *   hold (`held_micros`, counted while `held_until` is ahead: the holds of a process that died stop counting when the
 *   org has taken none for the hold lifetime).
 * - `trajectories_org_started_idx`: `GET /v1/usage` reads an org's runs by start time without scanning the org's rows.
 * - `corral_hold_spend`: the grant, in one call: the row is created if missing and locked (`FOR UPDATE`: holds of
 *   one org are taken one at a time, whichever process or node asks), the grant is what is left after the spend and
 *   the live holds, at most what was asked, and it is added to the holds. Each statement of a plpgsql function reads
 *   the latest committed row once it holds the lock, so two holds never both see the same room.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE org_spend (
    org_id text NOT NULL,
    day text NOT NULL,
    spent_micros bigint NOT NULL DEFAULT 0,
    held_micros bigint NOT NULL DEFAULT 0,
    held_until double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (org_id, day)
  )`
  yield* sql`CREATE INDEX trajectories_org_started_idx ON trajectories (org_id, started_at)`
  yield* sql`CREATE FUNCTION corral_hold_spend(
    p_org text, p_day text, p_per_day bigint, p_want bigint, p_at double precision, p_until double precision
  ) RETURNS TABLE (granted bigint, spent bigint, held bigint) LANGUAGE plpgsql AS $fn$
  DECLARE
    r org_spend%ROWTYPE;
    live bigint;
    g bigint;
  BEGIN
    INSERT INTO org_spend (org_id, day) VALUES (p_org, p_day) ON CONFLICT DO NOTHING;
    SELECT * INTO r FROM org_spend WHERE org_id = p_org AND day = p_day FOR UPDATE;
    live := CASE WHEN r.held_until > p_at THEN r.held_micros ELSE 0 END;
    g := GREATEST(0, LEAST(p_want, p_per_day - r.spent_micros - live));
    IF g > 0 THEN
      UPDATE org_spend SET held_micros = live + g, held_until = GREATEST(r.held_until, p_until)
        WHERE org_id = p_org AND day = p_day;
    END IF;
    RETURN QUERY SELECT g, r.spent_micros, live;
  END
  $fn$`
})
