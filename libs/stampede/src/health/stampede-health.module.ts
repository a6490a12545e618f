import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { StampedeHealthIndicator } from './stampede.health';

/**
 * Provides StampedeHealthIndicator. Import it next to StampedeModule.forRoot() in the module of
 * your health controller: `imports: [TerminusModule, StampedeHealthModule]`.
 */
@Module({
  imports: [TerminusModule],
  providers: [StampedeHealthIndicator],
  exports: [StampedeHealthIndicator],
})
export class StampedeHealthModule {}
