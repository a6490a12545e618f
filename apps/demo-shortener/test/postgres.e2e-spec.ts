import { describeShortenerApi } from './support/api-suite';
import { POSTGRES_URL, requirePostgres } from './support/env';

describeShortenerApi('PostgreSQL', async () => {
  await requirePostgres();
  return { url: POSTGRES_URL };
});
