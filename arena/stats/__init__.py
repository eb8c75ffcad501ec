"""The arithmetic of ranking: ratings (openskill, Bradley-Terry), balanced seat schedules, held-out
seeds and bootstrap intervals. Pure functions over outcomes and episodes; imports arena.core only."""
