// Sample bonuses for development, so a fresh `npm start` lists some. Existing codes are left alone.
import pg from 'pg';

const SAMPLES = [
  ['WELCOME100', 'Welcome bonus: 100% up to 100 EUR', 'WelcomeBonus', 'Casino', 10000, 'EUR', 30, 35],
  ['FREESPINS50', '50 free spins on Book of Gold', 'FreeSpins', 'Casino', 1000, 'EUR', 7, 20],
  ['CASHBACK10', '10% weekly cashback', 'CashbackBonus', 'Casino', 2500, 'EUR', 14, 1],
  ['RISKFREE20', 'Risk-free bet of 20 EUR', 'RiskFreeBet', 'Sportsbook', 2000, 'EUR', 14, 5],
  ['RELOAD50', 'Reload bonus: 50% up to 50 EUR', 'ReloadBonus', 'Casino', 5000, 'EUR', 30, 30],
];

export async function seed(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const [code, label, type, product, amount, currency, days, wagering] of SAMPLES) {
      await client.query(
        `INSERT INTO bonuses (code, label, type, product, amount_minor, currency, validity_days, wagering_requirement)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (code) DO NOTHING`,
        [code, label, type, product, amount, currency, days, wagering],
      );
    }
  } finally {
    await client.end();
  }
}
