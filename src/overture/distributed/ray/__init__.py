"""Everything of overture's that talks to Ray below the orchestration: joining or starting a
cluster (`cluster`), training ranks as actors (`ranks`), and the rollout engine as an actor with
its weight updates (`engine`). Ray is imported only when one of them is used."""
